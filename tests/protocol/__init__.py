"""Our wire protocol: messages, schema, codec (src/logbroker/protocol)."""
