"""HTTP plumbing the entry points share: credential checks and the 401 (``credentials``),
problem documents (``problems``).

It lives outside ``api/``, ``portal/``, ``oauth/`` and ``connector/`` so that none of them
imports another (DESIGN 2); it imports none of them either.
"""
