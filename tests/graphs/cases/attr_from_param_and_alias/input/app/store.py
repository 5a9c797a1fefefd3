class Store:
    def get(self, key):
        return key

    def put(self, key, value):
        return None
