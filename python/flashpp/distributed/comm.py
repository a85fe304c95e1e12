"""Point-to-point traffic around a ring of ranks, through torch.distributed
(NCCL for CUDA tensors, gloo for CPU tensors). Every rank sends to the next
rank and receives from the previous one; a transfer is started before the
computation it overlaps with and waited for after it."""

from typing import List, Optional, Sequence

import torch
import torch.distributed as dist


class Transfer:
    """Receive buffers of one started transfer; wait() before reading them."""

    def __init__(self, received: List[torch.Tensor], requests):
        self.received = received
        self._requests = requests

    def wait(self) -> List[torch.Tensor]:
        for r in self._requests:
            r.wait()
        self._requests = []
        return self.received


class Ring:
    def __init__(self, group: Optional[dist.ProcessGroup] = None):
        self.group = group
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        # P2P ops take global ranks; the group may be a subgroup.
        g = group if group is not None else dist.group.WORLD
        self.next = dist.get_global_rank(g, (self.rank + 1) % self.world)
        self.prev = dist.get_global_rank(g, (self.rank - 1) % self.world)

    def shift(self, tensors: Sequence[torch.Tensor], tag: int = 0) -> Transfer:
        """Starts sending `tensors` to the next rank and receiving the previous
        rank's tensors of the same shapes and dtypes into new buffers. The
        sent tensors must not be modified until the transfer is waited for.
        Transfers in flight at the same time need distinct tags (tag, tag + 1,
        ... are used): gloo matches messages by tag, NCCL by issue order,
        which is the same on every rank."""
        received = [torch.empty_like(t) for t in tensors]
        ops = []
        for i, (t, r) in enumerate(zip(tensors, received)):
            ops.append(dist.P2POp(dist.isend, t, self.next, self.group, tag + i))
            ops.append(dist.P2POp(dist.irecv, r, self.prev, self.group, tag + i))
        return Transfer(received, dist.batch_isend_irecv(ops))
