"""``paysign serve``: one server process, or a supervisor and N worker processes on one port."""
