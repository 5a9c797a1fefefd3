import torch.distributed as dist
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor


def step():
    dist.barrier()
    OrderedDict.fromkeys([])
    ThreadPoolExecutor.submit(None, print)
