#!/bin/sh
# Fills fuzz/corpus/<target>/ with the seed corpora: the examples, the case
# files and the TF fixtures of the repository. Run from the repository root.
set -eu
mkdir -p fuzz/corpus/opg fuzz/corpus/pbtxt fuzz/corpus/pb fuzz/corpus/run
find examples tests -name '*.opg' -exec cp {} fuzz/corpus/opg/ \;
find examples tests -name '*.opg' -exec cp {} fuzz/corpus/run/ \;
find examples tests -name '*.pbtxt' -exec cp {} fuzz/corpus/pbtxt/ \;
find examples tests -name '*.pb' -exec cp {} fuzz/corpus/pb/ \;
