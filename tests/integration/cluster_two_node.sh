#!/usr/bin/env bash
# The two-node cluster: a 2-node x 2-rank job trains and checkpoints over srun --mpi=pmix,
# with its ranks placed on both nodes. The cluster's task prolog makes every task's MPI yield
# while it waits (its nodes claim more CPUs than the machine has), unless the job chose.
source "$(dirname "$0")/lib.sh"
require_cluster 2
make_data
# Both "nodes" share this machine's host name, which makes Open MPI's shared-memory transport
# crash across them (see scripts/cluster.sh); a real cluster would not set this.
write_config two_nodes.toml two-nodes job.nodes=2 job.ranks_per_node=2 \
  job.env='{ OMPI_MCA_btl = "self,tcp" }' train.micro_batch=16
job=$(submit two_nodes.toml)
wait_for_job "$job" 120 COMPLETED FAILED CANCELLED
[ "$(job_field "$job" JobState)" = COMPLETED ] || { cat runs/two-nodes/logs/*; fail "job $job did not complete"; }
[ "$(job_field "$job" NodeList)" = "n[1-2]" ] || fail "the job ran on $(job_field "$job" NodeList), not n[1-2]"
"$TRAINCTL" ckpt verify runs/two-nodes
"$TRAINCTL" ckpt inspect runs/two-nodes | tee inspect.txt
grep -q "world_size 4, global_batch 64" inspect.txt || fail "not a 4-rank checkpoint"
"$TRAINCTL" ckpt ls runs/two-nodes >ls.txt && [ "$(grep -c 'step-' ls.txt)" = 3 ] || fail "keep_last = 3 not honoured"

yielding=$(env -u OMPI_MCA_mpi_yield_when_idle srun -N2 --ntasks-per-node=1 printenv OMPI_MCA_mpi_yield_when_idle | tr '\n' ' ')
[ "$yielding" = "1 1 " ] || fail "tasks on both nodes should get OMPI_MCA_mpi_yield_when_idle=1, got '$yielding'"
chosen=$(OMPI_MCA_mpi_yield_when_idle=0 srun -N1 printenv OMPI_MCA_mpi_yield_when_idle)
[ "$chosen" = 0 ] || fail "the task prolog overrode a job's own OMPI_MCA_mpi_yield_when_idle=0: '$chosen'"
echo "PASS"
