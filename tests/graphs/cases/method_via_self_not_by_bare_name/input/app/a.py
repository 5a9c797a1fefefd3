class A:
    def run(self):
        self.verify()
        self.check()

    def check(self):
        return True
