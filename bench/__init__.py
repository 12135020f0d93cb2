"""The signing benchmark run by ``python bench/sign.py``, one job per module."""
