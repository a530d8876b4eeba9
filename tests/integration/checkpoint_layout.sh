#!/usr/bin/env bash
# The checkpoint layout seen by h5dump: PyTorch state_dict names and shapes under /model,
# optimizer state under /optimizer, a crc32 on every dataset, the position and provenance
# attributes on /, and the JSON sidecar.
source "$(dirname "$0")/lib.sh"
make_data
write_config layout.toml layout model.hidden='[48, 24]' train.steps=4 checkpoint.every_steps=4
"$TRAINCTL" run layout.toml >/dev/null
checkpoint=$(checkpoint_of runs/layout 4)
h5dump -H "$checkpoint" >header.txt

expect() { grep -qE "$1" header.txt || fail "h5dump -H shows no $1"; }
expect 'GROUP "model"'
expect 'GROUP "optimizer"'
for name in 0 2 4; do
  expect "DATASET \"$name.weight\""
  expect "DATASET \"$name.bias\""
  expect "GROUP \"$name.weight\""
done
for attribute in format_version step epoch sample_position rng_seed world_size global_batch optimizer \
  optimizer_step loss config hostnames trainctl_version created_utc crc32; do
  expect "ATTRIBUTE \"$attribute\""
done
expect 'DATASET "exp_avg"'
expect 'DATASET "exp_avg_sq"'
# Shapes as torch.nn.Linear stores them: weight [out, in].
h5dump -H -d /model/0.weight "$checkpoint" | grep -q 'H5T_IEEE_F32LE' || fail "0.weight is not float32"
h5dump -H -d /model/0.weight "$checkpoint" | grep -q 'SIMPLE { ( 48, 32 ) / ( 48, 32 ) }' || fail "0.weight shape"
h5dump -H -d /model/2.weight "$checkpoint" | grep -q 'SIMPLE { ( 24, 48 ) / ( 24, 48 ) }' || fail "2.weight shape"
h5dump -H -d /model/4.bias "$checkpoint" | grep -q 'SIMPLE { ( 4 ) / ( 4 ) }' || fail "4.bias shape"
h5dump -a /step "$checkpoint" | grep -q '(0): 4' || fail "the step attribute is not 4"
sidecar=${checkpoint%.h5}.json
grep -q '"step":4,' "$sidecar" || fail "sidecar lacks the step"
grep -q '"hostname":"' "$sidecar" || fail "sidecar lacks the host"
grep -q '"hardware":"' "$sidecar" || fail "sidecar lacks the hardware"
echo "PASS"
