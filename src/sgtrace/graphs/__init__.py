"""graphs layer of sgtrace."""
