"""The own loop's copy of the model (engines/mlx/parts.py, filled by qwen35.py at load): the steps read only that
copy, building it leaves every parameter of mlx-vlm's modules as it was and adds no memory, and a shape the steps
do not expect is named."""

import gc

import pytest

from engines.mlx import qwen35
from engines.mlx.decoding import Decoder, Sampling
from engines.mlx.loading import load_drafter, load_model


def _loaded(tiny_model):
    loaded = load_model(str(tiny_model))
    load_drafter(loaded, None)
    return loaded


def _tokens(decoder, block: int) -> list[int]:
    ids = list(range(20, 52))
    state = decoder.new_state()
    first = decoder.feed(state, ids, 0, Sampling())
    return [t for step in decoder.decode(state, first, max_tokens=24, block=block, sampling=Sampling(),
                                         stop_ids=set(), cancelled=lambda: False) for t in step.tokens]


def _containers(loaded):
    """mlx-vlm's modules that only hold others (the model, its layers, their attention and feed-forward blocks,
    the MTP head): the steps used to read members of these; the leaves (norms, linear layers, the embedding,
    the rotary embedding) are what the copy calls."""
    lm = loaded.model.language_model
    found = [lm, lm.model, loaded.drafter]
    for layer in [*lm.model.layers, *loaded.drafter.layers]:
        found += [layer, layer.linear_attn if getattr(layer, "is_linear", False) else layer.self_attn, layer.mlp]
    return found


def test_the_steps_read_only_their_copy_of_the_model(tiny_model):
    """Emptied of everything the steps used to read, mlx-vlm's containers leave the own loop's output as it is."""
    emptied = _loaded(tiny_model)
    decoder = Decoder(emptied.model, emptied.drafter)  # nothing traced yet: each step is traced after the emptying
    for module in _containers(emptied):
        module.clear()  # its children and arrays
        module.__dict__.clear()  # its sizes and flags
    intact = _loaded(tiny_model)
    reference = Decoder(intact.model, intact.drafter)
    for block in (1, 3):
        assert _tokens(decoder, block) == _tokens(reference, block), block


def test_building_the_own_loop_leaves_every_parameter_of_mlx_vlms_modules_as_it_was(tiny_model):
    import mlx.core as mx
    from mlx.utils import tree_flatten

    loaded = _loaded(tiny_model)
    modules = {"model": loaded.model, "head": loaded.drafter}
    before = {(owner, name): value for owner, module in modules.items()
              for name, value in tree_flatten(module.parameters())}
    Decoder(loaded.model, loaded.drafter)
    after = {(owner, name): value for owner, module in modules.items()
             for name, value in tree_flatten(module.parameters())}
    assert after.keys() == before.keys()
    for key, value in before.items():
        now = after[key]
        assert (now.shape, now.dtype) == (value.shape, value.dtype), key
        assert mx.array_equal(now, value).item(), key


def test_building_the_own_loop_adds_no_copy_of_the_stacked_weights(tiny_model):
    """The stacks replace the layers' own arrays (which become views of them) rather than sit beside them."""
    import mlx.core as mx

    loaded = _loaded(tiny_model)
    mx.eval(loaded.model.parameters(), loaded.drafter.parameters())
    gc.collect()
    before = mx.get_active_memory()
    decoder = Decoder(loaded.model, loaded.drafter)
    gc.collect()
    added = mx.get_active_memory() - before
    stacked = sum(group.weight.nbytes for stepper in (decoder.target, decoder.drafter) for layer in stepper.layers
                  for group in (getattr(layer.mixer, "qkv", None) or layer.mixer.inputs, layer.mlp.gate_up)
                  if group is not None and group.weight is not None)
    assert stacked > 0
    assert added < 0.1 * stacked, f"building added {added} bytes beside {stacked} bytes of stacked weights"


def test_a_shape_the_steps_do_not_expect_is_named(tiny_model):
    loaded = _loaded(tiny_model)
    attention = loaded.model.language_model.model.layers[0].linear_attn
    attention.num_v_heads += 1
    with pytest.raises(qwen35.Unavailable, match=r"layer 0's linear attention has .*in_proj_z \d+ \(expected \d+\)"):
        qwen35.body(loaded.model)


def test_the_kernels_chosen_at_build_are_the_parts_and_stay_theirs(tiny_model):
    """A benchmark's ``KernelChoice`` reaches every product of the parts built with it, through the decoder and
    the engine too; parts built before or after keep the engine's default."""
    from engines.mlx.cuda import KernelChoice
    from engines.mlx.decoding import Decoder
    from webapp.measurement.bench import kernel_choice

    loaded = _loaded(tiny_model)
    before = qwen35.body(loaded.model)
    measured = kernel_choice("mlx")
    assert measured == KernelChoice(few_rows=False, tensor_cores=False)
    body, head = qwen35.body(loaded.model, measured), qwen35.mtp_head(loaded.drafter, measured)
    decoder = Decoder(loaded.model, loaded.drafter, measured)
    after = qwen35.body(loaded.model)

    def products(parts) -> list:
        found = [parts.head] if hasattr(parts, "head") else [parts.fc]
        for layer in parts.layers:
            mixer = layer.mixer
            found += [mixer.qkv, mixer.o_proj] if hasattr(mixer, "qkv") else [mixer.inputs, mixer.out_proj]
            found += [layer.mlp.gate_up, layer.mlp.down]
        return found

    assert {record.kernels for record in products(body) + products(head)} == {measured}
    assert {record.kernels for record in products(before) + products(after)} == {KernelChoice()}
    assert {record.kernels for record in products(decoder.target.body)} == {measured}
