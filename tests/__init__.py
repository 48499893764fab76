"""logbroker's tests, one package per source package (tests/README.md); helpers in
``tests.support``, fixtures registered in tests/conftest.py."""
