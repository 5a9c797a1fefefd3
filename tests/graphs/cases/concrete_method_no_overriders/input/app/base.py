class Backend:
    def step(self):
        return self.execute()

    def execute(self):
        return "default"
