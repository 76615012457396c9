# Helpers only (no rules): the run grid is read from the registry and the config.
import algorithms


def selected_algorithms():
    names = config["algorithms"]
    known = algorithms.available()
    if names == "all":
        return known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"config 'algorithms': unknown {unknown}; available: {known}")
    return names


def trace_paths():
    return expand(
        "results/traces/{dataset}/{algorithm}/seed{seed}.parquet",
        dataset=list(config["datasets"]),
        algorithm=selected_algorithms(),
        seed=config["seeds"],
    )


def option_args(wildcards):
    opts = config.get("options", {}).get(wildcards.algorithm, {})
    return " ".join(f"--option {k}={v}" for k, v in opts.items())
