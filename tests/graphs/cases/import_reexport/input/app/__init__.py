from app.impl import Worker, make_worker
