"""Security: ACLs, SCRAM authentication, quotas and limits, TLS."""
