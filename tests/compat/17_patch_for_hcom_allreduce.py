"""torchair.patch_for_hcom() and a collective inside a compiled function, as tensor-parallel
serving code does under TorchAir: a 2-process torch.distributed group (gloo on the CPU where
the NPU uses hccl; torch.multiprocessing spawn, MASTER_ADDR 127.0.0.1 and a free port), a
column-/row-parallel MLP whose partial output is summed with dist.all_reduce inside the
compiled forward (fullgraph=True), and an all_gather of the result. Each rank checks its
output against the unsharded eager MLP and that torchair compiled the matmuls."""

import datetime
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

NAME = "17_patch_for_hcom_allreduce"
WORLD = 2
HIDDEN, INTER = 32, 64


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RowParallelMLP(torch.nn.Module):
    def __init__(self, w1, b1, w2, b2, rank, world):
        super().__init__()
        shard = INTER // world
        cols = slice(rank * shard, (rank + 1) * shard)
        self.w1 = torch.nn.Parameter(w1[cols].clone())  # column-parallel: a slice of the outputs
        self.b1 = torch.nn.Parameter(b1[cols].clone())
        self.w2 = torch.nn.Parameter(w2[:, cols].clone())  # row-parallel: a slice of the inputs
        self.b2 = torch.nn.Parameter(b2.clone())

    def forward(self, x):
        h = torch.nn.functional.gelu(torch.nn.functional.linear(x, self.w1, self.b1))
        partial = torch.nn.functional.linear(h, self.w2)
        dist.all_reduce(partial, op=dist.ReduceOp.SUM)
        return partial + self.b2


def worker(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    device = torch.device("cpu")  # "npu" with torch_npu on Ascend (and backend "hccl")
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    try:
        import torchair
        import torchair.backend
        from torchair.configs.compiler_config import CompilerConfig

        reports = []
        compile_graph = torchair.backend.compile_graph

        def recording_compile_graph(*args, **kwargs):
            compiled, report = compile_graph(*args, **kwargs)
            reports.append(report)
            return compiled, report

        torchair.backend.compile_graph = recording_compile_graph

        torchair.patch_for_hcom()

        torch.manual_seed(0)  # the same full weights on every rank
        w1, b1 = torch.randn(INTER, HIDDEN) * 0.2, torch.randn(INTER) * 0.1
        w2, b2 = torch.randn(HIDDEN, INTER) * 0.2, torch.randn(HIDDEN) * 0.1
        model = RowParallelMLP(w1, b1, w2, b2, rank, world).to(device).eval()

        config = CompilerConfig()
        config.mode = "max-autotune"
        config.experimental_config.frozen_parameter = True
        npu_backend = torchair.get_npu_backend(compiler_config=config)
        compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=npu_backend)

        for step in range(3):
            torch.manual_seed(100 + step)
            x = torch.randn(4, 8, HIDDEN, device=device)  # every rank has the same input
            with torch.no_grad():
                got = compiled(x)
                want = torch.nn.functional.linear(torch.nn.functional.gelu(torch.nn.functional.linear(x, w1, b1)), w2, b2)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=lambda m: f"rank {rank} step {step}: {m}")
            gathered = [torch.empty_like(got) for _ in range(world)]
            dist.all_gather(gathered, got)
            for other in gathered:
                torch.testing.assert_close(other, got, rtol=1e-5, atol=1e-5)

        assert reports, f"rank {rank}: torchair compiled nothing"
        compiled_ops = [op for r in reports for s in r.subgraphs if s.compiled for op in s.ops]
        assert any("mm" in op for op in compiled_ops), [str(r) for r in reports]
        # the collective was captured in the graph (no graph break) and runs in eager between
        # torchair's compiled subgraphs
        fallbacks = {op for r in reports for _, op, _ in r.fallbacks}
        assert any("all_reduce" in op for op in fallbacks), [str(r) for r in reports]
        print(f"rank {rank}: " + " / ".join(str(r).splitlines()[0] for r in reports), flush=True)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def main():
    port = free_port()
    mp.spawn(worker, args=(WORLD, port), nprocs=WORLD, join=True)
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()
