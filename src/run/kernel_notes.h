// What stopped a kernel's cell, in the words a run's stderr and a Jupyter client's stderr both
// use: "wall-clock time limit of 10 s reached", "memory limit of 512 MiB reached", ... Each
// caller adds what became of the kernel, which only it knows (a session's kernel, a notebook
// run's own, a Jupyter client's). Pure.
#pragma once

#include <string>

#include "config/config.h"
#include "kernel/kernel.h"

namespace sandrun::run {

// The limit (or the kernel's death) that stopped the cell of `r`, with the value from
// `limits`; "" when the cell ended on its own (ok or an exception of its own).
std::string CellStoppedBy(const kernel::ExecuteResult& r, const config::Limits& limits);

}  // namespace sandrun::run
