"""The broker process: server, connections, answering, produce and fetch handling, memory, fd limit, kill -9."""
