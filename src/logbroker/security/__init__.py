"""Security, the request pipeline's middleware: SASL/SCRAM sessions, users,
ACLs (rules per request kind, stores), quotas (docs/security.md)."""
