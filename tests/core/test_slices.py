"""The MIG instance pool (``core/slices.py``): one instance per ask of its profile, first asked
first served, holders keep theirs, and a holder whose instance left the layout is told."""

from __future__ import annotations

import pytest

from jupyter_elastic_gpu.core.reason_kinds import ReasonKind
from jupyter_elastic_gpu.core.reason_text import say
from jupyter_elastic_gpu.core.slices import Slice, SliceAsk, assign, check_profile, profiles

# GPU 0: one 3g.40gb and two 2g.20gb; GPU 1: seven 1g.10gb
LAYOUT = [
    Slice("MIG-a", "0", "3g.40gb"),
    Slice("MIG-b", "0", "2g.20gb"),
    Slice("MIG-c", "0", "2g.20gb"),
    *(Slice(f"MIG-d{i}", "1", "1g.10gb") for i in range(7)),
]


def test_each_ask_gets_one_instance_of_its_profile_and_none_is_given_twice():
    asks = [SliceAsk(f"j{i}", "2g.20gb") for i in range(3)] + [SliceAsk("k", "3g.40gb")]
    out = assign(LAYOUT, asks)
    assert sorted(out.grants.values()) == ["MIG-a", "MIG-b", "MIG-c"]
    assert out.grants["k"] == "MIG-a"
    assert set(out.grants) == {"j0", "j1", "k"}  # first asked first served
    why = out.reasons["j2"]
    assert why.kind == ReasonKind.MIG_SLICE
    assert say(why.kind, why.figures()) == "queued: needs a 2g.20gb MIG slice: 2 here, all held"


def test_holders_keep_their_instance_and_later_asks_queue_behind_each_other():
    asks = [
        SliceAsk("old", "3g.40gb", held="MIG-a"),
        SliceAsk("w1", "3g.40gb"),
        SliceAsk("w2", "3g.40gb"),
    ]
    out = assign(LAYOUT, asks)
    assert out.grants == {"old": "MIG-a"}
    assert out.reasons["w1"].figures() == {"profile": "3g.40gb", "slices": 1}
    assert out.reasons["w2"].figures() == {"profile": "3g.40gb", "slices": 1, "before": 1}
    assert not out.gone


def test_an_instance_that_left_the_layout_is_gone_and_no_one_else_gets_it():
    relaid = [s for s in LAYOUT if s.id != "MIG-b"]
    asks = [SliceAsk("holder", "2g.20gb", held="MIG-b"), SliceAsk("next", "2g.20gb")]
    out = assign(relaid, asks)
    assert out.gone == {"holder": "MIG-b"}
    assert out.grants == {"next": "MIG-c"}


def test_an_id_now_naming_an_instance_of_another_profile_is_gone_too():
    relaid = [Slice("MIG-d0", "1", "3g.40gb")]
    out = assign(relaid, [SliceAsk("holder", "1g.10gb", held="MIG-d0")])
    assert out.gone == {"holder": "MIG-d0"} and not out.grants


def test_a_profile_no_gpu_has_any_more_says_so():
    out = assign(LAYOUT, [SliceAsk("j", "4g.40gb")])
    assert say(ReasonKind.MIG_SLICE, out.reasons["j"].figures()) == (
        "queued: needs a 4g.40gb MIG slice: none here now (a GPU's MIG layout changed)"
    )


def test_a_drained_gpu_hands_out_none_of_its_instances_and_its_holders_move_off():
    asks = [
        SliceAsk("holder", "3g.40gb", held="MIG-a"),  # on GPU 0
        SliceAsk("small", "1g.10gb", held="MIG-d0"),  # on GPU 1
        SliceAsk("next", "2g.20gb"),
    ]
    out = assign(LAYOUT, asks, drained={"0"})
    assert out.drained == {"holder": "MIG-a"} and not out.gone
    assert out.grants == {"small": "MIG-d0"}
    why = out.reasons["next"]
    assert say(why.kind, why.figures()) == (
        "queued: needs a 2g.20gb MIG slice: none in service now (2 on a GPU drained for "
        "maintenance)"
    )
    # put back in service: the holder's instance is its own again
    assert assign(LAYOUT, asks).grants["holder"] == "MIG-a"


def test_an_instance_claimed_twice_goes_to_the_first_claim_only():
    asks = [SliceAsk("a", "1g.10gb", held="MIG-d0"), SliceAsk("b", "1g.10gb", held="MIG-d0")]
    out = assign(LAYOUT, asks)
    assert out.grants == {"a": "MIG-d0"}
    assert out.gone == {"b": "MIG-d0"}


def test_new_instances_come_from_the_gpu_with_the_fewest_free():
    layout = [
        Slice("x0", "0", "1g.10gb"),
        Slice("x1", "0", "1g.10gb"),
        Slice("y0", "1", "1g.10gb"),
        Slice("y1", "1", "1g.10gb"),
    ]
    out = assign(layout, [SliceAsk("h", "1g.10gb", held="y0"), SliceAsk("n", "1g.10gb")])
    assert out.grants["n"] == "y1"  # GPU 1 fills up; GPU 0 stays whole for a new layout


@pytest.mark.parametrize("name", ["1g.10gb", "3G.40GB", " 7g.80gb ", "1g.10gb+me", "1c.3g.40gb"])
def test_profiles_are_read_as_nvml_writes_them(name):
    assert check_profile(name) == name.strip().lower()


@pytest.mark.parametrize("name", ["", "1g", "10gb", "1g.10gb; rm", "a" * 50, "1g.10gb,2g.20gb"])
def test_anything_else_is_refused_with_what_a_profile_is(name):
    with pytest.raises(ValueError, match=r"is not a MIG profile: expected one such as 1g\.10gb"):
        check_profile(name)


def test_profiles_are_listed_with_their_counts():
    assert profiles(LAYOUT) == "1 3g.40gb, 2 2g.20gb, 7 1g.10gb"
