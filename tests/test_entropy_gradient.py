"""TRL's entropy bonus reaches the gradient in psnlib's grouped forward (issue 50, item 10): an
upstream TRL once logged the bonus in the loss without it moving a weight. With ``loss_groups``
> 1 (the loss forward run group by group), one step with ``entropy_coef`` 1 must move the
weights elsewhere than the same step with 0, everything else equal."""

import torch
from conftest import tiny_trainer


def _trained(tmp_path, coef: float, groups: int) -> dict[str, torch.Tensor]:
    trainer = tiny_trainer(
        tmp_path / f"{coef}-{groups}",
        sigma=0.0,
        use_tis=False,
        entropy_coef=coef,
        loss_groups=groups,
    )
    trainer.train()
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def test_the_entropy_bonus_moves_the_weights_in_the_grouped_forward(tmp_path):
    torch.manual_seed(0)
    without, grouped = (_trained(tmp_path, coef, 2) for coef in (0.0, 1.0))
    moved = max(float((grouped[k] - without[k]).abs().max()) for k in without)
    assert moved > 1e-4, "entropy_coef=1 left every weight where entropy_coef=0 put it"
    again = _trained(
        tmp_path / "again", 0.0, 2
    )  # and the step is deterministic, so it is the bonus
    assert all(torch.equal(again[k], without[k]) for k in without)
