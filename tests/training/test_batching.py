import pytest
import torch

from rlrun.algorithms.aggregation import LOSS_AGG_MODES
from rlrun.algorithms.policy_losses import vanilla
from rlrun.training.batching import UpdateMetrics, global_agg_kwargs, plan_minibatches, split_by_tokens
from rlrun.training.sequences import Sequences, forward_batched, response_log_probs


def _batch(rows=12, prompt=5, response=7, vocab=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    prompts = [
        torch.randint(2, vocab, (int(n),), generator=g).tolist()
        for n in torch.randint(2, prompt + 1, (rows,), generator=g)
    ]
    lengths = torch.randint(1, response + 1, (rows,), generator=g)
    mask = (torch.arange(response) < lengths[:, None]).long()
    ids = torch.randint(2, vocab, (rows, response), generator=g) * mask
    return Sequences.build(prompts, ids, mask, pad_id=0), torch.randn(rows, response, generator=g)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_micro_batches_accumulate_to_the_whole_mini_batch(random_lm, mode):
    seq, advantages = _batch()
    old = response_log_probs(random_lm, seq, 1.0)[0].detach() + 0.05 * torch.randn_like(advantages)

    def loss_of(rows, agg_kwargs):
        q = seq.rows(rows)
        width = q.response_mask.shape[1]
        log_probs = response_log_probs(random_lm, q, 1.0)[0]
        return vanilla(
            old[rows, :width],
            log_probs,
            advantages[rows, :width],
            q.response_mask,
            mode,
            agg_kwargs=agg_kwargs,
        )[0]

    everything = torch.arange(12)
    whole = loss_of(everything, global_agg_kwargs(seq.response_mask, loss_scale_factor=7))
    whole.backward()
    expected = [p.grad.clone() for p in random_lm.parameters()]
    random_lm.zero_grad()

    (mb,) = plan_minibatches(
        seq.response_mask,
        mini_batch=12,
        micro_batch=5,
        generator=torch.Generator().manual_seed(1),
        loss_scale_factor=7,
    )
    assert [len(m) for m in mb.micro] == [5, 5, 2]
    total = 0.0
    for rows in mb.micro:  # shorter micro-batches are cut to their own response width
        loss = loss_of(rows, mb.agg_kwargs)
        loss.backward()
        total += loss.detach()
    torch.testing.assert_close(total, whole.detach(), rtol=1e-5, atol=1e-6)
    for p, g in zip(random_lm.parameters(), expected):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)


def test_token_budget_micro_batches_take_the_longest_rows_first():
    # Lengths 5 1 3 3 8, prompts 2 wide, 14 tokens: 10 alone (2 x 10 > 14); then 7 (rows 0 and
    # 2 cost 2 x 7 = 14, a third would cost 21); then 5 (rows 3 and 1: 2 x 5 = 10).
    rows = torch.tensor([10, 11, 12, 13, 14])
    micro = split_by_tokens(rows, torch.tensor([5, 1, 3, 3, 8]), budget=14, prompt_width=2)
    assert [m.tolist() for m in micro] == [[14], [10, 12], [13, 11]]
    # a row longer than the budget still trains, alone
    assert [m.tolist() for m in split_by_tokens(rows[:2], torch.tensor([9, 9]), budget=4)] == [[10], [11]]


def test_token_budget_micro_batches_accumulate_to_the_whole_mini_batch(random_lm):
    seq, advantages = _batch(rows=10)
    old = response_log_probs(random_lm, seq, 1.0)[0].detach()

    def gradient(plan):
        random_lm.zero_grad()
        for mb in plan:
            for rows in mb.micro:
                q = seq.rows(rows)
                width = q.response_mask.shape[1]
                log_probs = response_log_probs(random_lm, q, 1.0)[0]
                loss = vanilla(
                    old[rows, :width],
                    log_probs,
                    advantages[rows, :width],
                    q.response_mask,
                    agg_kwargs=mb.agg_kwargs,
                )[0]
                loss.backward()
        return [p.grad.clone() for p in random_lm.parameters()]

    def plan(**micro):
        generator = torch.Generator().manual_seed(3)
        return plan_minibatches(seq.response_mask, mini_batch=10, generator=generator, **micro)

    by_tokens = plan(
        micro_batch=10, micro_batch_tokens=3 * (seq.prompt_width + 7), prompt_width=seq.prompt_width
    )
    assert len(by_tokens[0].micro) > 1
    for expected, got in zip(gradient(plan(micro_batch=10)), gradient(by_tokens)):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)
    # the reference/old-log-prob forward cut by tokens returns rows in their own order
    whole = forward_batched(lambda q: response_log_probs(random_lm, q, 1.0)[0], seq=seq, chunk=10)
    cut = forward_batched(
        lambda q: response_log_probs(random_lm, q, 1.0)[0], seq=seq, chunk=10, chunk_tokens=20
    )
    mask = seq.response_mask  # beyond a row's response both hold padding's numbers, or 0
    torch.testing.assert_close(cut * mask, whole * mask, rtol=1e-5, atol=1e-6)


def test_plan_covers_every_row_once_shuffled_and_reproducibly():
    mask = torch.ones(10, 3)
    plan = plan_minibatches(mask, mini_batch=4, micro_batch=2, generator=torch.Generator().manual_seed(0))
    rows = torch.cat([mb.indices for mb in plan])
    assert sorted(rows.tolist()) == list(range(10)) and rows.tolist() != list(range(10))
    again = plan_minibatches(mask, mini_batch=4, micro_batch=2, generator=torch.Generator().manual_seed(0))
    assert torch.equal(torch.cat([mb.indices for mb in again]), rows)
    assert [mb.agg_kwargs["global_batch_size"] for mb in plan] == [4, 4, 2]


def test_data_parallel_counts_are_global():
    kwargs = global_agg_kwargs(torch.ones(2, 3), dp_size=2, reduce_sum=lambda x: 2 * x)
    assert kwargs["batch_num_tokens"] == 12 and kwargs["global_batch_size"] == 4 and kwargs["dp_size"] == 2


def test_update_metrics_sum_losses_and_weight_means():
    out = UpdateMetrics()
    out.add(sums={"loss": torch.tensor(1.0)}, means={"clipfrac": torch.tensor(0.5)}, weight=0.25)
    out.add(sums={"loss": torch.tensor(2.0)}, means={"clipfrac": torch.tensor(0.1)}, weight=0.75)
    out.end_minibatch({"grad_norm": 4.0})
    out.add(sums={"loss": torch.tensor(1.0)}, means={"clipfrac": torch.tensor(0.0)}, weight=1.0)
    out.end_minibatch({"grad_norm": 2.0})
    result = out.result()
    assert result["loss"] == pytest.approx((3.0 + 1.0) / 2)
    assert result["clipfrac"] == pytest.approx((0.125 + 0.075 + 0.0) / 2)
    assert result["grad_norm"] == pytest.approx(3.0)
