"""The model protocol: head spec layout and validation, predictors, joint."""

import pytest
import torch

from transdec.model import JointNetwork, LSTMPredictor, StatelessPredictor, TransducerDecoder
from transdec.protocol import DecodingModel, HeadSpec, Joint, Predictor
from transdec.model.synthetic import random_decoder


def test_head_layouts():
    rnnt = HeadSpec("rnnt", 10)
    assert (rnnt.blank_id, rnnt.num_labels, rnnt.num_outputs, rnnt.predictor_blank_id) == (10, 11, 11, 10)
    tdt = HeadSpec("tdt", 10, durations=[0, 1, 2, 3, 4])
    assert (tdt.blank_id, tdt.num_labels, tdt.num_outputs) == (10, 11, 16)
    assert tdt.durations == (0, 1, 2, 3, 4)
    multiblank = HeadSpec("multiblank", 10, big_blank_durations=[2, 4, 8])
    assert (multiblank.blank_id, multiblank.num_outputs, multiblank.predictor_blank_id) == (13, 14, 10)
    assert [multiblank.big_blank_id(i) for i in range(3)] == [12, 11, 10]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(kind="ctc", num_tokens=5), "kind"),
        (dict(kind="rnnt", num_tokens=0), "num_tokens"),
        (dict(kind="tdt", num_tokens=5), "needs durations"),
        (dict(kind="tdt", num_tokens=5, durations=(1, 1)), "distinct"),
        (dict(kind="tdt", num_tokens=5, durations=(0,)), "positive"),
        (dict(kind="rnnt", num_tokens=5, durations=(0, 1)), "TDT heads only"),
        (dict(kind="multiblank", num_tokens=5), "needs big_blank_durations"),
        (dict(kind="multiblank", num_tokens=5, big_blank_durations=(1, 2)), "at least 2"),
        (dict(kind="tdt", num_tokens=5, durations=(0, 1), big_blank_durations=(2,)), "multi-blank heads only"),
    ],
)
def test_head_spec_rejects_bad_layouts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        HeadSpec(**kwargs)


def make_predictor(kind: str):
    torch.manual_seed(0)
    if kind == "lstm":
        return LSTMPredictor(vocab_size=8, hidden_size=12, num_layers=3).double()
    return StatelessPredictor(vocab_size=8, hidden_size=12, context_size=3).double()


def stepped_outputs(predictor, labels: torch.Tensor) -> torch.Tensor:
    """Outputs of ``step`` over the start symbol and then ``labels [B, U]``: ``[B, U + 1, H]``."""
    state = predictor.initial_state(labels.shape[0])
    output, state = predictor.step(torch.full((labels.shape[0],), predictor.blank_id), state)
    outputs = [output]
    for u in range(labels.shape[1]):
        output, state = predictor.step(labels[:, u], state)
        outputs.append(output)
    return torch.stack(outputs, dim=1)


@pytest.mark.parametrize("kind", ["lstm", "stateless"])
@pytest.mark.parametrize("inference", [False, True])
def test_predictor_steps_match_teacher_forcing(kind, inference):
    """``step`` (decoding) and ``forward`` (training) must be the same function of the label history."""
    predictor = make_predictor(kind)
    assert isinstance(predictor, Predictor)
    labels = torch.randint(0, 7, (4, 6))
    expected = predictor(labels).detach()  # [B, U + 1, H]
    with torch.inference_mode(inference):
        torch.testing.assert_close(stepped_outputs(predictor, labels), expected, rtol=0, atol=1e-12)


def test_lstm_step_follows_weight_updates_and_casts():
    """The first layer's cached input-gate table must never outlive the weights it was built from."""
    predictor = LSTMPredictor(vocab_size=8, hidden_size=12, num_layers=1).double()
    labels = torch.randint(0, 7, (3, 5))
    with torch.inference_mode():
        stepped_outputs(predictor, labels)  # builds the table
    with torch.no_grad():
        predictor.embedding.weight.mul_(2.0)
        predictor.lstm.bias_hh_l0.add_(0.5)
    with torch.inference_mode():
        torch.testing.assert_close(stepped_outputs(predictor, labels), predictor(labels), rtol=0, atol=1e-12)
    predictor.float()
    with torch.inference_mode():
        torch.testing.assert_close(stepped_outputs(predictor, labels), predictor(labels), rtol=1e-5, atol=1e-6)
    predictor.load_state_dict(LSTMPredictor(vocab_size=8, hidden_size=12, num_layers=1).state_dict())
    with torch.inference_mode():
        torch.testing.assert_close(stepped_outputs(predictor, labels), predictor(labels), rtol=1e-5, atol=1e-6)


def test_lstm_made_under_inference_mode_steps() -> None:
    with torch.inference_mode():
        torch.manual_seed(0)
        predictor = LSTMPredictor(vocab_size=8, hidden_size=12, num_layers=2)
        labels = torch.randint(0, 7, (3, 4))
        torch.testing.assert_close(stepped_outputs(predictor, labels), predictor(labels), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["lstm", "stateless"])
def test_predictor_select_and_gather_states(kind):
    predictor = make_predictor(kind)
    start = predictor.initial_state(3)
    out_a, state_a = predictor.step(torch.tensor([1, 2, 3]), start)
    out_b, state_b = predictor.step(torch.tensor([4, 5, 6]), start)
    mixed = predictor.select_state(torch.tensor([True, False, True]), state_a, state_b)
    next_labels = torch.tensor([0, 0, 0])
    mixed_out, _ = predictor.step(next_labels, mixed)
    out_from_a, _ = predictor.step(next_labels, state_a)
    out_from_b, _ = predictor.step(next_labels, state_b)
    torch.testing.assert_close(mixed_out[[0, 2]], out_from_a[[0, 2]])
    torch.testing.assert_close(mixed_out[1], out_from_b[1])
    gathered = predictor.gather_state(state_a, torch.tensor([2, 2, 0]))
    gathered_out, _ = predictor.step(next_labels, gathered)
    torch.testing.assert_close(gathered_out, out_from_a[[2, 2, 0]])


def test_blank_start_embeds_as_zeros():
    predictor = make_predictor("stateless")
    output, _ = predictor.step(torch.tensor([7]), predictor.initial_state(1))
    assert torch.count_nonzero(output) == 0


def test_stateless_predictor_needs_divisible_width():
    with pytest.raises(ValueError, match="divisible"):
        StatelessPredictor(vocab_size=8, hidden_size=10, context_size=3)


@pytest.mark.parametrize("head", [HeadSpec("rnnt", 7), HeadSpec("tdt", 7, durations=(0, 1, 2))])
def test_joint_lattice_matches_projected_combine(head):
    torch.manual_seed(0)
    joint = JointNetwork(encoder_dim=5, predictor_dim=6, joint_dim=4, head=head).double()
    assert isinstance(joint, Joint)
    encoder_out, predictor_out = torch.randn(2, 3, 5).double(), torch.randn(2, 4, 6).double()
    lattice = joint(encoder_out, predictor_out)
    assert lattice.shape == (2, 3, 4, head.num_outputs)
    one = joint.combine(joint.project_encoder(encoder_out)[1, 2], joint.project_predictor(predictor_out)[1, 3])
    torch.testing.assert_close(lattice[1, 2, 3], one)


def test_joint_names_a_wrong_encoder_width():
    joint = JointNetwork(encoder_dim=5, predictor_dim=6, joint_dim=4, head=HeadSpec("rnnt", 7))
    with pytest.raises(ValueError, match="feature size 9, the joint expects 5"):
        joint.project_encoder(torch.zeros(1, 2, 9))


def test_decoder_checks_its_parts_agree():
    head = HeadSpec("multiblank", 7, big_blank_durations=(2,))
    joint = JointNetwork(4, 6, 4, head)
    with pytest.raises(ValueError, match="blank id"):
        TransducerDecoder(head, LSTMPredictor(vocab_size=9, hidden_size=6), joint)
    with pytest.raises(ValueError, match="joint was built for"):
        TransducerDecoder(HeadSpec("rnnt", 7), LSTMPredictor(vocab_size=8, hidden_size=6), joint)
    model = TransducerDecoder(head, LSTMPredictor(vocab_size=8, hidden_size=6), joint)
    assert isinstance(model, DecodingModel)


def test_random_decoder_is_reproducible_and_leaves_global_rng_alone():
    head = HeadSpec("rnnt", 7)
    state = torch.random.get_rng_state()
    first = random_decoder(head, blank_rate=0.8, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    second = random_decoder(head, blank_rate=0.8, seed=3)
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)


def test_bundled_model_is_a_speech_model():
    from transdec.loading import load_model
    from transdec.protocol import SpeechModel

    assert isinstance(load_model("tiny-en-rnnt"), SpeechModel)
