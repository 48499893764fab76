"""Consumer groups (issue 11): rebalances after kill -9 and a clean leave, group vs
single consumer: ``python -m bench.groups``; its member processes run ``bench.groups.member``."""
