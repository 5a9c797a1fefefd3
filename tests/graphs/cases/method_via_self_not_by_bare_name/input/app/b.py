class B:
    def verify(self):
        return True

    def run(self):
        self.verify()
