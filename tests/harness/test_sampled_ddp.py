"""Lightning DDP over batches of target vertices: two CPU processes (gloo) step as one process on both batches."""

from __future__ import annotations

import copy
import os
import warnings

import pytest
import torch
from torch.utils.data import DistributedSampler

from tests.harness.test_sampled_training import _prepared
from topomodelx_attention.data import SubComplexSampler
from topomodelx_attention.harness.task_module import GraphTaskModule

BATCH = 6
# Adam's first step is lr·g/(|g| + eps): with the default eps it is lr·sign(g), which turns a
# gradient that is zero up to rounding (the two sides sum it in another order) into ±lr. With
# eps = 1 the step is a smooth function of the gradient, so equal gradients give equal steps.
OPTIMIZER = {"lr": 0.01, "scheduler": "constant", "eps": 1.0}


def _gloo() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_gloo_available()


@pytest.mark.slow  # two spawned processes import torch and Lightning (~20 s on 2 busy cores)
@pytest.mark.skipif(not _gloo(), reason="torch.distributed with the gloo backend is not available")
def test_two_processes_step_as_one_process_on_the_mean_loss_of_their_batches(tmp_path):
    import lightning as L
    from lightning.pytorch.strategies import DDPStrategy

    _, prepared, net = _prepared(tmp_path)
    info, data = prepared.info, prepared.complexes[0]
    sampler = SubComplexSampler(data, hops=2)
    targets = torch.arange(1, data.num_cells(0), 2)  # 60 targets: 30 per process, 5 batches each
    loader = sampler.loader(targets, batch_size=BATCH)
    initial = copy.deepcopy(net).train()

    module = GraphTaskModule(copy.deepcopy(initial), info, OPTIMIZER)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(start_method="spawn", process_group_backend="gloo", find_unused_parameters=True),
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module, loader)  # Lightning gives each process a DistributedSampler over the targets

    def first_batch(rank: int) -> torch.Tensor:
        # Lightning's training sampler: shuffled, seeded by the global seed (epoch 0)
        seed = int(os.environ.get("PL_GLOBAL_SEED", 0))
        shard = list(DistributedSampler(targets, num_replicas=2, rank=rank, shuffle=True, seed=seed))
        return targets[shard[:BATCH]]

    def one_process_step(batches: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        reference = GraphTaskModule(copy.deepcopy(initial), info, OPTIMIZER)
        optimizer = reference.configure_optimizers()["optimizer"]
        losses = [reference._loss_and_prediction(sampler.sample(b))[0] for b in batches]
        torch.stack(losses).mean().backward()
        optimizer.step()
        return dict(reference.model.named_parameters())

    union = one_process_step([first_batch(0), first_batch(1)])
    alone = one_process_step([first_batch(0)])
    trained = dict(module.model.named_parameters())
    moved = False
    for name, before in initial.named_parameters():
        torch.testing.assert_close(trained[name], union[name], rtol=0, atol=1e-6, msg=name)
        moved |= not torch.equal(trained[name], before)
    assert moved, "the step changed no parameter"
    assert any(not torch.allclose(union[n], alone[n], rtol=0, atol=1e-6) for n in union), (
        "one batch gives the same step: the test cannot tell the processes' batches apart"
    )
