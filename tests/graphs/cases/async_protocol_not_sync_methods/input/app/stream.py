class SyncOnly:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        return self

    def __next__(self):
        raise StopIteration


class AsyncOnly:
    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


async def serve():
    async with SyncOnly():
        pass
    async for item in SyncOnly():
        print(item)
    with AsyncOnly():
        pass
