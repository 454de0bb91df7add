"""One round of Werewolf on switchboard, through the Python SDK (a port of
examples/werewolf in the hub's repository)."""
