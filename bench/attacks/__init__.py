"""Attacks on a broker and what another client feels meanwhile (issue 29):
``python -m bench.attacks``; ``mix.attack`` is shared with the acceptance
test tests/broker/test_attack_mix.py."""
