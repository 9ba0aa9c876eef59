"""Sampling one token per row from hand-made logits, the noise it draws, and the decode loop."""

import torch

from rlrun.rollout import SamplingParams, sampler
from rlrun.rollout.sampler import NoiseRows, Scratch, decode, exponential_noise, next_token

# next_token on hand-made logits: probabilities 0.5, 0.3, 0.15, 0.05 over tokens 0..3
_PROBS = torch.tensor([[0.5, 0.3, 0.15, 0.05]])


def _draws(sampling: SamplingParams, banned=None, count: int = 4000) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.bincount(next_token(_PROBS.log().expand(count, 4), sampling, banned), minlength=4)


def test_top_p_keeps_the_smallest_set_reaching_p_and_renormalises():
    # Ascending cumulative mass 0.05, 0.20, 0.50, 1.0: with top_p 0.8 tokens 3 and 2 (0.2 <= 1 - 0.8)
    # drop, leaving {0, 1} sampled as 0.5/0.8 and 0.3/0.8.
    counts = _draws(SamplingParams(top_p=0.8))
    assert counts[2:].tolist() == [0, 0]
    assert abs(counts[0].item() / 4000 - 0.625) < 0.03


def test_top_k_then_banned_tokens():
    # EOS masking comes first (as transformers applies min_new_tokens before its warpers):
    # with token 0 banned, the top 2 are {1, 2}, sampled as 0.3/0.45 and 0.15/0.45.
    counts = _draws(SamplingParams(top_k=2), banned=torch.tensor([0]))
    assert counts[0] == 0 and counts[3] == 0
    assert abs(counts[1].item() / 4000 - 2 / 3) < 0.03
    assert next_token(_PROBS.log(), SamplingParams(greedy=True), torch.tensor([0])).item() == 1


def test_plain_sampling_follows_the_distribution():
    freq = _draws(SamplingParams()).float() / 4000
    torch.testing.assert_close(freq, _PROBS[0], atol=0.03, rtol=0)


def test_a_sample_is_the_exponential_race_over_one_float32_uniform_draw():
    logits = torch.randn(5, 11, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(3)
    q = -torch.rand(5, 11).log()
    torch.manual_seed(3)
    assert torch.equal(next_token(logits, SamplingParams(), None), (logits.softmax(-1) / q).argmax(-1))


def test_exponential_noise_is_exp_1():
    torch.manual_seed(0)
    q = exponential_noise(1000, 1000, device=torch.device("cpu"))
    assert (q >= 0).all()
    # Exp(1): mean 1, P(q > 1) = 1/e, P(q > 5) = e^-5 = 0.006738 (10^6 draws: 3 standard errors
    # are 0.003 for the mean, 0.0014 and 0.00025 for the tail fractions).
    assert abs(q[q.isfinite()].double().mean().item() - 1.0) < 0.003
    assert abs((q > 1).double().mean().item() - 0.367879) < 0.0015
    assert abs((q > 5).double().mean().item() - 0.006738) < 0.00025


def test_a_zero_probability_token_never_wins_even_against_infinite_noise():
    # q = inf (u = 0) where p = 0 must give 0, not NaN (argmax would pick a NaN).
    logits = torch.tensor([[0.0, float("-inf"), 0.0]])
    noise = torch.tensor([[1.0, float("inf"), 2.0]])
    assert next_token(logits, SamplingParams(), None, noise=noise).item() == 0
    noise = torch.tensor([[float("inf"), 0.5, 2.0]])
    assert next_token(logits, SamplingParams(), None, noise=noise).item() == 2


# The decode loop over a bigram table (the logits after a token are its row): token t is most
# likely followed by NEXT[t] with probability 1/2, each other token 1/6. EOS is 3, padding 0.
NEXT = [1, 2, 3, 1]
TABLE = torch.tensor([[0.5 if j == NEXT[t] else 1 / 6 for j in range(4)] for t in range(4)]).log()
EOS = torch.tensor([3])


def _decode(first_tokens, sampling, *, fraction, noise=None, calls=None):
    """Decode rows whose first logits are those after `first_tokens`, recording each step's
    (tokens, going) and each drop's ended rows in `calls`."""
    calls = [] if calls is None else calls

    def step(token, going):
        calls.append(("step", token.tolist(), going.tolist()))
        return TABLE[token]

    def drop(ended):
        calls.append(("drop", ended.tolist()))
        return (~ended).nonzero().squeeze(-1)

    first = TABLE[torch.tensor(first_tokens)]
    noise = noise or NoiseRows(len(first_tokens))
    return decode(
        first,
        sampling=sampling,
        eos=EOS,
        pad_id=0,
        noise=noise,
        step=step,
        drop=drop,
        compact_ended_fraction=fraction,
    )


def test_decode_runs_each_going_row_until_its_eos_and_drops_ended_rows():
    # greedy: after 2 comes 3 (EOS) at once; after 0: 1, 2, 3; after 1: 2, 3
    calls = []
    turn = _decode([2, 0, 1], SamplingParams(greedy=True, max_tokens=5), fraction=0.0, calls=calls)
    assert turn.tokens.tolist() == [[3, 0, 0], [1, 2, 3], [2, 3, 0]]
    assert turn.mask.tolist() == [[1, 0, 0], [1, 1, 1], [1, 1, 0]]
    half = torch.tensor(0.5).log().item()
    torch.testing.assert_close(turn.log_probs, torch.tensor([[half, 0, 0], [half] * 3, [half, half, 0]]))
    assert calls == [
        ("drop", [True, False, False]),
        ("step", [1, 2], [True, True]),
        ("drop", [False, True]),
        ("step", [2], [True]),
    ]


def test_rows_that_ended_but_stay_run_padding_that_is_not_kept():
    calls = []
    turn = _decode([2, 0, 1], SamplingParams(greedy=True, max_tokens=5), fraction=2.0, calls=calls)
    assert turn.tokens.tolist() == [[3, 0, 0], [1, 2, 3], [2, 3, 0]]
    # a row's EOS is run in the step after it (not kept), then padding
    assert calls == [("step", [3, 1, 2], [False, True, True]), ("step", [0, 2, 3], [False, True, False])]


def test_a_turn_over_some_rows_takes_their_rows_of_every_steps_noise():
    sampling = SamplingParams(max_tokens=6, seed=None)
    torch.manual_seed(0)
    every_row = _decode([0, 1, 2, 3], sampling, fraction=0.0)
    torch.manual_seed(0)
    two_rows = _decode([3, 1], sampling, fraction=0.0, noise=NoiseRows(4, torch.tensor([3, 1])))
    width = int(two_rows.mask.sum(-1).max())
    assert torch.equal(two_rows.tokens, every_row.tokens[[3, 1], :width])


def test_scratch_hands_out_the_first_rows_of_one_tensor_per_name():
    scratch = Scratch(7, device=torch.device("cpu"))
    first = scratch("noise", 4)
    assert first.shape == (4, 7)
    assert scratch("noise", 2).data_ptr() == first.data_ptr()  # fewer rows: the same storage
    assert scratch("work", 2).data_ptr() != first.data_ptr()
    assert scratch("noise", 5).shape == (5, 7)  # more rows than held: a larger tensor


def _random_turn():
    """A turn over a random 4-row, 50-token bigram table with every kind of work tensor in use:
    temperature, EOS banned for 2 tokens, rows dropped as they end, a turn over 4 of 6 noise rows."""
    table = torch.randn(50, 50, generator=torch.Generator().manual_seed(0)) * 3
    eos = torch.tensor([7, 9])
    torch.manual_seed(1)
    return decode(
        table[torch.tensor([1, 2, 3, 4])],
        sampling=SamplingParams(temperature=0.7, min_tokens=2, max_tokens=12, seed=None),
        eos=eos,
        pad_id=0,
        noise=NoiseRows(6, torch.tensor([5, 0, 2, 3])),
        step=lambda token, going: table[token],
        drop=lambda ended: (~ended).nonzero().squeeze(-1),
        compact_ended_fraction=0.0,
    )


def test_work_tensors_kept_across_steps_sample_what_fresh_tensors_sample(monkeypatch):
    kept = _random_turn()
    # Every request a fresh tensor of NaN: a stale or shared buffer read anywhere would differ.
    monkeypatch.setattr(
        sampler.Scratch, "__call__", lambda self, name, rows: torch.full((rows, self.vocab), float("nan"))
    )
    fresh = _random_turn()
    assert int(kept.mask.sum()) > 8 and not bool(kept.mask.all())  # rows of several lengths: drops ran
    assert torch.equal(kept.tokens, fresh.tokens) and torch.equal(kept.log_probs, fresh.log_probs)
