"""float32 products at full precision (webapp/precision.py): set at process start unless the user set them."""

from webapp.precision import VARIABLE, float32_products, keep_float32_exact


def test_tf32_is_turned_off_unless_the_environment_says_otherwise():
    unset, chosen = {}, {VARIABLE: "1"}
    keep_float32_exact(unset)
    keep_float32_exact(chosen)
    assert unset == {VARIABLE: "0"} and chosen == {VARIABLE: "1"}
    assert float32_products(unset) == f"full float32 ({VARIABLE}=0)"
    assert float32_products(chosen).startswith("TF32 where the hardware has it")


def test_the_cli_runs_float32_in_full_and_a_users_choice_stands(start_server, tiny_model, monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    default = start_server("--model", str(tiny_model))
    default.wait_ready()
    assert any(f"float32 products: full float32 ({VARIABLE}=0)" in line for line in default.lines)
    monkeypatch.setenv(VARIABLE, "1")
    chosen = start_server("--model", str(tiny_model))
    chosen.wait_ready()
    assert any(f"float32 products: TF32 where the hardware has it ({VARIABLE}=1)" in line for line in chosen.lines)
