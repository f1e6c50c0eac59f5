"""The batched searches keep what they carry between steps in a declared state object, and in place (as CUDA
graphs capture the steps) that object and every tensor in it stay the same from one decode to the next."""

import dataclasses

import pytest
import torch
from graph_fakes import replay_eagerly
from helpers import assert_same_hypotheses, encoder_batch, model_for

from transdec.decoding import greedy_reference
from transdec.decoding.batched_hyps import BatchedHyps
from transdec.decoding.beam.aes_pp import AesState
from transdec.decoding.beam.alsd_pp import AlsdPlusOptions, AlsdSearch, AlsdState, beam_alsd_pp
from transdec.decoding.beam.wind_batched import WindBeamState
from transdec.decoding.beam_hyps import BatchedBeamHyps
from transdec.decoding.beam import alsd_pp_graphs as beam_graphs
from transdec.decoding.greedy import label_looping_graphs
from transdec.decoding.cuda import search_graphs
from transdec.decoding.cuda.in_place import copy_into, copy_of, set_state
from transdec.decoding.greedy.label_looping import LabelLoopingSearch, LabelLoopingState
from transdec.decoding.scoring import Scoring


def state_tensors(value) -> list[torch.Tensor]:
    """Every tensor in a search state, in a fixed order: through dataclasses, tuples, lists, dicts and the
    hypothesis stores."""
    if isinstance(value, torch.Tensor):
        return [value]
    if dataclasses.is_dataclass(value):
        return [t for field in dataclasses.fields(value) for t in state_tensors(getattr(value, field.name))]
    if isinstance(value, dict):
        return [t for part in value.values() for t in state_tensors(part)]
    if isinstance(value, (tuple, list)):
        return [t for part in value for t in state_tensors(part)]
    if isinstance(value, (BatchedHyps, BatchedBeamHyps)):
        return [t for part in vars(value).values() for t in state_tensors(part)]
    return []


def same_objects(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


@pytest.mark.parametrize("window", [1, 4])
def test_in_place_label_looping_keeps_its_state_tensors(window):
    model = model_for("tdt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([24] * 4, seed=0)
    search = LabelLoopingSearch(model, frames.clone(), lengths.clone(), 3, window, in_place=True)
    assert search.state is None  # made by the first start()
    state = tensors = None
    for seed, batch in enumerate([[24, 3, 0, 17], [1, 24, 24, 9]]):
        new_frames, new_lengths = encoder_batch(batch, seed=seed)
        search.encoder_out.copy_(new_frames)
        search.lengths.copy_(new_lengths)
        search.run()
        expected = greedy_reference(model, new_frames, new_lengths, max_symbols_per_frame=3).hypotheses()
        assert_same_hypotheses(search.result().hypotheses(), expected)
        if state is None:
            state, tensors = search.state, state_tensors(search.state)
        assert search.state is state and same_objects(state_tensors(state), tensors)
    assert isinstance(state, LabelLoopingState) and state.stats is None
    # Both loop conditions live in one tensor, so that the step_graphs host loop reads them with one sync.
    assert state.active_any.data_ptr() == state.flags.data_ptr()
    assert state.searching_any.data_ptr() == state.flags[1].data_ptr()


@torch.inference_mode()
def test_in_place_alsd_keeps_its_state_tensors():
    with torch.inference_mode(False):  # the shared models stay usable with autograd
        model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = torch.zeros(3, 32, 16, dtype=torch.float64), torch.zeros(3, dtype=torch.long)
    options = AlsdPlusOptions(beam_size=3, nbest=2, max_symbols_per_frame=3)
    search = AlsdSearch(model, frames, lengths, options, Scoring(model.head), in_place=True)
    state, tensors = search.state, state_tensors(search.state)  # the constructor's start() made it
    assert isinstance(state, AlsdState) and state.stats is None
    for seed, batch in enumerate([[24, 3, 0], [1, 24, 9]]):
        new_frames, new_lengths = encoder_batch(batch, seed=seed)
        search.encoder_out[:, : new_frames.shape[1]].copy_(new_frames)
        search.lengths.copy_(new_lengths.unsqueeze(1))
        search.start()
        search.run()
        expected = beam_alsd_pp(model, new_frames, new_lengths, beam_size=3, nbest=2, max_symbols_per_frame=3)
        assert [[h.tokens for h in n] for n in search.nbest()] == [[h.tokens for h in n] for n in expected.nbest]
        assert search.state is state and same_objects(state_tensors(state), tensors)


def test_eager_searches_rebind_their_state():
    """Without in_place, updates rebind fields (cheaper on a CPU), and each start() makes a new state."""
    model = model_for("rnnt", "lstm", "label_heavy")
    frames, lengths = encoder_batch([9, 4], seed=0)
    search = LabelLoopingSearch(model, frames, lengths, 3, 1)
    search.run()
    first = search.state
    assert first.calls is None and first.flags is None and first.stats.predictor_calls > 0
    search.run()
    assert search.state is not first
    assert_same_hypotheses(search.result().hypotheses(), greedy_reference(model, frames, lengths, max_symbols_per_frame=3).hypotheses())


@pytest.mark.parametrize("state_class", [LabelLoopingState, AlsdState, AesState, WindBeamState])
def test_a_state_holds_only_its_declared_fields(state_class):
    assert "__slots__" in vars(state_class)  # no attribute can be added by mistake
    fields = {field.name for field in dataclasses.fields(state_class)}
    assert {"hyps", "encoder_proj", "predictor_state"} <= fields and "state" not in fields


@dataclasses.dataclass(slots=True)
class _Toy:
    x: torch.Tensor
    pair: tuple[torch.Tensor, torch.Tensor]
    later: torch.Tensor | None = None


def test_set_state_writes_in_place_or_rebinds():
    state = _Toy(torch.zeros(3), (torch.zeros(2), torch.zeros(2)))
    x, pair = state.x, state.pair
    set_state(state, "x", torch.arange(3.0), in_place=True)
    set_state(state, "pair", (torch.ones(2), torch.full((2,), 2.0)), in_place=True)
    assert state.x is x and state.pair is pair and x.tolist() == [0.0, 1.0, 2.0] and pair[1].tolist() == [2.0, 2.0]
    value = torch.ones(4)
    set_state(state, "later", value, in_place=True)  # the first value of a field: a copy, not shared
    assert state.later is not value and torch.equal(state.later, value)
    set_state(state, "x", value, in_place=False)
    assert state.x is value
    for in_place in (True, False):
        with pytest.raises(AttributeError, match="declares no field 'y'"):
            set_state(state, "y", value, in_place)


def test_copies_reach_tensors_in_dicts():
    """The fused kernels keep their per-row emission in a dict of tensors."""
    buffers = {"labels": torch.zeros(3, dtype=torch.long), "logprobs": torch.zeros(3)}
    copy = copy_of(buffers)
    assert copy.keys() == buffers.keys() and all(copy[k] is not buffers[k] for k in buffers)
    labels = buffers["labels"]
    copy_into(buffers, {"labels": torch.arange(3), "logprobs": torch.ones(3)})
    assert buffers["labels"] is labels and labels.tolist() == [0, 1, 2]


@pytest.fixture
def interpreted_graphs(monkeypatch):
    """The graph wrappers' loops run on the CPU, on the flags they took from the search state."""
    replay_eagerly(monkeypatch, label_looping_graphs, search_graphs, interpret_conditionals=True)


@pytest.mark.parametrize("mode", ["while_loops", "step_graphs"])
def test_greedy_graph_loops_run_on_the_state_flags(interpreted_graphs, mode):
    model = model_for("tdt", "lstm", "label_heavy")
    graphed = label_looping_graphs.GraphedLabelLooping(model, 4, 64, 16, torch.float64, torch.device("cpu"), 3, 4,
                                                       mode, False, None)
    for seed, batch in enumerate([[24, 3, 0, 17], [1, 24, 24, 9]]):
        frames, lengths = encoder_batch(batch, seed=seed)
        expected = greedy_reference(model, frames, lengths, max_symbols_per_frame=3).hypotheses()
        assert_same_hypotheses(graphed.decode(frames, lengths).hypotheses(), expected)


@pytest.mark.parametrize("mode", ["while_loops", "step_graphs"])
@torch.inference_mode()
def test_beam_graph_loops_run_on_the_state_flag(interpreted_graphs, mode):
    with torch.inference_mode(False):
        model = model_for("tdt", "lstm", "label_heavy")
    options = AlsdPlusOptions(beam_size=3, nbest=2, max_symbols_per_frame=3, cuda_graphs=mode)
    graphed = beam_graphs.GraphedAlsd(model, 4, 64, 16, torch.float64, torch.device("cpu"), options, mode)
    for seed, batch in enumerate([[24, 3, 0, 17], [1, 24, 24, 9]]):
        frames, lengths = encoder_batch(batch, seed=seed)
        expected = beam_alsd_pp(model, frames, lengths, beam_size=3, nbest=2, max_symbols_per_frame=3,
                                cuda_graphs="off")
        got = graphed.decode(frames, lengths)
        assert [[h.tokens for h in n] for n in got.nbest] == [[h.tokens for h in n] for n in expected.nbest]
        assert got.stats.joint_calls == expected.stats.joint_calls
