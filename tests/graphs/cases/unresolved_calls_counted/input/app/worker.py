import torch


class Worker:
    def __init__(self, model):
        self.model = model

    def step(self, batch, handlers):
        self.model.forward(batch)
        batch.prepare()
        len(batch)
        torch.cuda.synchronize()
        handlers["done"]()
        undefined_function()
        self.missing()
