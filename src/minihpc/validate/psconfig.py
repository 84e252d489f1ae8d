"""The parameter-server workload's config files (specs/parameter-server.md: ``nn_config.yaml``
and ``cluster_config.yaml``) as flags of ``validate run``: a ``--config`` file may use their
keys, nested ``model:`` and ``dataset:`` sections included, beside the flag names.

nn_config.yaml           the flag            cluster_config.yaml   the flag
  batch_size             --batch-size          num_workers         --workers
  learning_rate          --lr                  timeout             --ps-timeout
  num_epochs             --epochs              host_ip             --ps-host
  eval_steps             --eval-steps          worker_connect_ip   --ps-connect
  track_gradients        --track-gradients     port                --ps-port
  model.type             --model (SimpleNN, SimpleMLP, MLP: mlp; Net: the MNIST CNN)
  model.input_dim        --in-features
  model.hidden           --hidden (one size, a list, or "64,64")
  model.out              the model's outputs: checked (1 for synthetic, 10 for MNIST)
  dataset.name           --workload (MNIST, synthetic)

Pure: :func:`translate` turns a file's table into flag values, naming every key it does not
know; :mod:`minihpc.validate.config` refuses those with one line.
"""

from __future__ import annotations

from minihpc.core.errors import UsageError

KEYS = {
    "batch_size": "batch_size", "learning_rate": "lr", "num_epochs": "epochs", "eval_steps": "eval_steps",
    "track_gradients": "track_gradients", "num_workers": "workers", "timeout": "ps_timeout",
    "host_ip": "ps_host", "worker_connect_ip": "ps_connect", "port": "ps_port",
}
"""Top-level keys of the spec's two files and the flag each sets."""

SECTIONS = {
    "model": {"type": "model", "input_dim": "in_features", "hidden": "hidden", "out": "out_features"},
    "dataset": {"name": "workload"},
}
"""The spec's nested sections: each key and the flag it sets."""

MODEL_TYPES = {"simplenn": "mlp", "simplemlp": "mlp", "mlp": "mlp", "net": "net"}
"""model.type (any case) -> --model."""


def _value(flag: str, key: str, value):
    """A section value as the flag takes it."""
    if flag == "model":
        kind = MODEL_TYPES.get(str(value).lower())
        if kind is None:
            raise UsageError(f"{key}: {value!r} is not a model this validator trains "
                             f"(one of: SimpleNN, SimpleMLP, MLP, Net)")
        return kind
    if flag == "workload":
        return str(value).lower()
    if flag == "hidden" and isinstance(value, list):
        return ",".join(str(v) for v in value)
    if flag == "hidden" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def translate(table: dict) -> tuple[dict, dict, list[str]]:
    """(flag values, {flag: the key the file wrote}, keys nobody knows) for one table of a
    config file. Flag names (dashes or underscores) pass through; :data:`KEYS` and
    :data:`SECTIONS` are translated; any other nested table is unknown, as is any key of a
    section that is not in it (named ``model.kind``)."""
    values, names, unknown = {}, {}, []
    for key, value in table.items():
        if isinstance(value, dict):
            if key not in SECTIONS:
                unknown.append(key)
                continue
            for sub, inner in value.items():
                flag = SECTIONS[key].get(sub)
                if flag is None:
                    unknown.append(f"{key}.{sub}")
                    continue
                values[flag], names[flag] = _value(flag, f"{key}.{sub}", inner), f"{key}.{sub}"
            continue
        flag = KEYS.get(key, key.replace("-", "_"))
        values[flag], names[flag] = value, key
    return values, names, unknown
