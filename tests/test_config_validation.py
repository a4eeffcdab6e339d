"""``PSNGRPOConfig`` refuses every number psnlib adds or relies on that is not finite or is out of
its documented range, with a one-line ValueError naming the setting and the value; values at the
edges of each range pass."""

import math

import pytest

from psnlib.trainer import PSNGRPOConfig

NAN, INF = math.nan, math.inf


def settings(tmp_path, **overrides) -> dict:
    return {
        "output_dir": str(tmp_path),
        "per_device_train_batch_size": 8,
        "num_generations": 4,
        "max_steps": 2,
        "report_to": "none",
        "use_cpu": True,
        "bf16": False,
        **overrides,
    }


BAD = [
    ("temperature", NAN, r"temperature must be a finite number > 0, got nan"),
    ("temperature", 0.0, r"temperature must be a finite number > 0, got 0.0"),
    ("learning_rate", NAN, r"learning_rate must be a finite number > 0, got nan"),
    ("learning_rate", -1.0, r"learning_rate must be a finite number > 0, got -1.0"),
    ("beta", NAN, r"beta must be a finite number >= 0, got nan"),
    ("beta", -0.1, r"beta must be a finite number >= 0, got -0.1"),
    ("weight_decay", NAN, r"weight_decay must be a finite number >= 0, got nan"),
    ("max_grad_norm", INF, r"max_grad_norm must be a finite number >= 0 .*got inf"),
    ("epsilon", NAN, r"epsilon must be a finite number >= 0, got nan"),
    ("epsilon_high", NAN, r"epsilon_high must be a finite number >= 0, got nan"),
    ("adam_beta2", 1.0, r"adam_beta2 must be in \[0, 1\), got 1.0"),
    ("num_train_epochs", NAN, r"num_train_epochs must be a finite number > 0, got nan"),
    ("seed", -1, r"seed must be an integer in \[0, 4294967295\], got -1"),
    ("seed", 2**32, r"seed must be an integer in \[0, 4294967295\], got 4294967296"),
    ("noise_seed", -1, r"noise_seed must be an integer in \[0, 4294967295\], got -1"),
    ("sigma", 1e30, r"sigma must be in \[0, 1\] .*got 1e\+30"),
    ("sigma", NAN, r"sigma must be a finite number >= 0 .*got nan"),
    ("sigma_max", 1e30, r"sigma_max must be in \(0, 1\], got 1e\+30"),
    ("sigma_min", NAN, r"sigma_min and sigma_max must be finite .*got sigma_min=nan"),
    ("kl_target", NAN, r"kl_target must be a finite number > 0, got nan"),
    ("kl_factor", INF, r"kl_factor must be a finite number > 1, got inf"),
    ("kl_tolerance", 0.5, r"kl_tolerance must be a finite number >= 1, got 0.5"),
    ("div_lam", NAN, r"div_lam .*must be in \[0, 1\], got nan"),
    ("div_beta", 1.0, r"div_beta .*must be in \(0, 1\), got 1.0"),
    ("div_fraction", NAN, r"div_fraction must be in \(0, 1\], got nan"),
    ("tis_cap", 1e308, r"tis_cap must be in \(0, 4.85165e\+08\] .*got 1e\+308"),
    ("tis_cap", NAN, r"cap must be a finite number > 0 .*got nan"),
    ("prefix_prob", NAN, r"prefix_prob must be in \[0, 1\], got nan"),
    ("passk_k", 0, r"passk_k must be an integer >= 1, got 0"),
]


# The adaptive schedulers' settings are read (and checked) only with their scheduler.
SCHEDULER = {
    **dict.fromkeys(
        ["sigma_min", "sigma_max", "kl_target", "kl_factor", "kl_tolerance"], "kl_target"
    ),
    **dict.fromkeys(["div_lam", "div_beta", "div_fraction"], "diversity"),
}


@pytest.mark.parametrize(("name", "value", "message"), BAD, ids=[f"{n}={v}" for n, v, _ in BAD])
def test_a_bad_number_is_a_one_line_error_naming_it(tmp_path, name, value, message):
    overrides = {name: value, "sigma_scheduler": SCHEDULER.get(name, "fixed")}
    with pytest.raises(ValueError, match=message) as error:
        PSNGRPOConfig(**settings(tmp_path, **overrides))
    assert "\n" not in str(error.value)


EDGES = [
    {"sigma": 0.0},
    {"sigma": 1.0},
    {"sigma_scheduler": "kl_target", "sigma": 1.0, "sigma_max": 1.0, "kl_factor": 1e6},
    {"tis_cap": math.exp(20)},
    {"beta": 0.0, "weight_decay": 0.0, "max_grad_norm": 0.0, "epsilon": 0.0},
    {"seed": 0, "data_seed": 2**32 - 1, "noise_seed": 7},
    {"temperature": 1e-3, "learning_rate": 1e-9},
    {"prefix_prob": 1.0, "passk_k": 1},
]


@pytest.mark.parametrize("overrides", EDGES)
def test_values_at_the_edges_of_their_ranges_pass(tmp_path, overrides):
    config = PSNGRPOConfig(**settings(tmp_path, **overrides))
    assert all(getattr(config, k) == v for k, v in overrides.items())
