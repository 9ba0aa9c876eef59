import torch

from rlrun.training import metrics as m


def test_step_metrics_across_processes_mean_max_min_and_summed_throughput():
    shares = [
        {"loss": 1.0, "response_length/max": 5.0, "response_length/min": 2.0, "perf/throughput": 10.0},
        {"loss": 3.0, "response_length/max": 7.0, "response_length/min": 1.0, "perf/throughput": 30.0},
    ]
    sent: dict[str, list[torch.Tensor]] = {"sum": [], "max": []}

    def record(x, op):  # what each process contributes to each collective
        sent[op].append(x)
        return x

    for share in shares:
        m.across_processes(share, record, 2)

    def collective(x, op):
        everyone = torch.stack(sent[op])
        return everyone.sum(0) if op == "sum" else everyone.max(0).values

    assert m.across_processes(shares[0], collective, 2) == {
        "loss": 2.0,
        "response_length/max": 7.0,
        "response_length/min": 1.0,
        "perf/throughput": 40.0,
    }
