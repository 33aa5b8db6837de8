# %% [markdown]
# # gpuprof from a notebook
#
# Cells in the `# %%` format (Jupyter via jupytext, VS Code, Spyder), or run it whole:
#
#     GPUPROF_TARGET=unix:/run/gpuprof/gpuprofd.sock PYTHONPATH=python python3 python/examples/sweep_notebook.py
#
# The radix cells run on the CPU, so they work on any box with a daemon; the index cells run
# only where the daemon has a GPU. tests/python/client_e2e_test runs this file against a real
# daemon.

# %%
import asyncio
from collections import Counter

import pandas as pd

import gpuprof
import gpuprof.aio

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 30)

# The target comes from the argument, else $GPUPROF_TARGET, else the CLI's config file.
c = gpuprof.Client()
print(c, c.whoami()["user"], "authenticated by", c.whoami()["authenticated_by"])
# Short radix runs for a demo (its fewest timed passes, no time floor); leave these out for the
# daemon's defaults.
short = dict(max_iters=5, min_time=0)

# %% [markdown]
# ## One experiment: submit, wait, read the headline and the full result

# %%
e = c.submit("radix", requests=500, users=8, wait=True, **short)
print(e)  # <Experiment exp-... radix finished 1.2e+06 op/s>
h = e.headline
noise = "unknown" if h.relative_noise is None else f"{100 * h.relative_noise:.1f}%"
print(f"{h.name} = {h.value:,.0f} {h.unit} (noise {noise}, over {h.samples} passes)")
print("hit rate:", e.result["radix"]["hit_rate"])  # the result as a dict

# %% [markdown]
# ## Watching: every event, as a blocking iterator and with asyncio

# %%
events = list(e.watch())  # replays the stored events; live ones follow while it runs
print(Counter(event.WhichOneof("payload") for event in events))
print("last:", events[-1].seq, gpuprof.message_to_dict(events[-1].state))


async def watch_async(experiment_id: str) -> int:
    async with gpuprof.aio.AsyncClient(c.target) as ac:
        return len([event async for event in ac.watch(experiment_id)])


print("events seen by asyncio:", asyncio.run(watch_async(e.id)))

# %% [markdown]
# ## A sweep, as a DataFrame (one row per point: axes, headline, statistics)

# %%
s = c.submit_sweep("radix", {"requests": [200, 400, 800]}, users=8, wait=True, **short)
sweep_frame = s.to_dataframe()
print(sweep_frame[["point", "num_requests", "state", "figure", "value", "unit", "noise", "samples"]])

# %% [markdown]
# ## Everything I ran, newest first

# %%
mine = c.experiments(mine=True, limit=20).to_dataframe()
print(mine[["experiment", "workload", "state", "figure", "value", "unit", "noise"]])

# %% [markdown]
# ## On a GPU: the embedding gather, its bandwidth and % of the measured copy bandwidth

# %%
if c.gpus():
    g = c.submit("index", tokens=4096, hidden=4096, dtype="bf16", gpus=[0], wait=True)
    print(g, g.headline.pct_of_bound, "% of", g.headline.bound_reference)
    curve = c.submit_sweep("index", {"tokens": [1024, 4096, 16384]}, hidden=4096, gpus=[0], wait=True)
    print(curve.to_dataframe()[["num_tokens", "gb_per_s", "pct_of_copy", "median_us", "p99_us"]])
else:
    print("no GPU on this daemon: the index cells are skipped")
