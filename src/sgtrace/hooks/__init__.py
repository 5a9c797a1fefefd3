"""hooks layer of sgtrace."""
