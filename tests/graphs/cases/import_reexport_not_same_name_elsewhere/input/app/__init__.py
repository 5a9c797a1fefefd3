from app.impl import Worker
