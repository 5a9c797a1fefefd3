from typing import AsyncGenerator, AsyncIterator


class Session:
    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    def send(self):
        return 1


class Token:
    def decode(self):
        return "t"


class Chunk:
    def size(self):
        return 0


class Feed:
    def __aiter__(self):
        return self

    async def __anext__(self) -> Token:
        raise StopAsyncIteration


async def tokens() -> AsyncIterator[Token]:
    yield Token()


async def chunks() -> AsyncGenerator[Chunk, None]:
    yield Chunk()


async def serve():
    async with Session() as session:
        session.send()
    async for token in Feed():
        token.decode()
    async for tok in tokens():
        tok.decode()
    async for chunk in chunks():
        chunk.size()
    return [c.size() async for c in chunks()]
