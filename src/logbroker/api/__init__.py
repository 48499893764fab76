"""The request pipeline and its handlers: every request of both listeners
passes one sequence (pipeline.py) to one handler per request kind
(registry.py)."""
