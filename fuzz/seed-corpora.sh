#!/bin/sh
# Fills fuzz/corpus/<target>/ with the seed corpora: the examples, the case
# files and the TF fixtures of the repository. Run from the repository root.
set -eu
mkdir -p fuzz/corpus/opg fuzz/corpus/pbtxt fuzz/corpus/pb fuzz/corpus/run fuzz/corpus/saved_model fuzz/corpus/bundle
find examples tests -name '*.opg' -exec cp {} fuzz/corpus/opg/ \;
find examples tests -name '*.opg' -exec cp {} fuzz/corpus/run/ \;
find examples tests -name '*.pbtxt' -exec cp {} fuzz/corpus/pbtxt/ \;
find examples tests -name '*.pb' -exec cp {} fuzz/corpus/pb/ \;
# The TF2 corpus: each SavedModel's saved_model.pb, and each checkpoint as
# a 4-byte little-endian index length, the index, then its data shard.
for model in tests/tf/corpus_tf2/*/; do
    name=$(basename "$model")
    cp "$model/saved_model/saved_model.pb" "fuzz/corpus/saved_model/$name.pb"
    index="$model/saved_model/variables/variables.index"
    len=$(wc -c < "$index")
    le=$(printf '\\%03o\\%03o\\%03o\\%03o' $((len & 255)) $((len >> 8 & 255)) $((len >> 16 & 255)) $((len >> 24 & 255)))
    # shellcheck disable=SC2059
    printf "$le" > "fuzz/corpus/bundle/$name"
    cat "$index" "$model/saved_model/variables/variables.data-00000-of-00001" >> "fuzz/corpus/bundle/$name"
done
