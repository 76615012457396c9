# dpmmbench workflow: `snakemake --cores 2` runs the default config (no network needed).
from snakemake.utils import validate


# A config file named with --configfile defines the whole run: Snakemake would otherwise merge
# it into the default (a paper config would also run every default dataset).
if not workflow.overwrite_configfiles:

    configfile: "workflows/config/default.yaml"


validate(config, "workflows/schemas/config.schema.yaml")


include: "workflows/common.smk"
include: "workflows/data.smk"
include: "workflows/run.smk"
include: "workflows/priors.smk"
include: "workflows/report.smk"


rule all:
    input:
        "results/summary.csv",
        "results/report/index.html",
