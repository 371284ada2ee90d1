// PNG plots drawn by gnuplot, the bytes handed back to the caller: the script (its data inline as datablocks) goes to
// gnuplot from a scratch folder of this process (core/scratch_dir.h) and the image comes back on gnuplot's standard
// output, so the tool writes the
// PNG itself (atomically, a full disk named as for every other output: a helper's disk-full campaign, session 56, had
// "internal error: gnuplot failed to write c.png") and leaves no scratch file beside it.
// provides: gnuplot_available, gnuplot_datablock, gnuplot_png_bytes
#pragma once
#include <string>

namespace retro {

// Whether `gnuplot` is on PATH.
bool gnuplot_available();
// "$NAME << EOD\n" + rows + "EOD\n": data a script's plot commands read as $NAME (or a string variable holding "$NAME").
// `rows` ends with a newline; data sets separated by two empty lines are its `index` 0, 1, ...
std::string gnuplot_datablock(const std::string& name, const std::string& rows);
// Runs gnuplot on "set terminal png size W,H\nset output\n" + body and returns the PNG. InternalError where gnuplot
// fails or writes no image (a script of ours it refuses: gnuplot's first message line said); UserError where the
// script cannot be written.
std::string gnuplot_png_bytes(const std::string& body, int width, int height);

}  // namespace retro
