// The Python distributions installed into one directory (`pip install --target`, a prepared
// environment's site directory) and the files each of them installed, as its
// NAME-VERSION.dist-info/RECORD lists them (pip writes the RECORD itself, with every file it
// installed). pip puts every distribution of a --target install in that one directory and
// lets a later one overwrite an earlier one's files: a distribution that ships another's
// modules would replace them for whoever imports them. FindOverwrites says whether that
// happened. Reads the directory without following symlinks (its content is a sandbox's).
#pragma once

#include <string>

namespace sandrun::storage {

// "" when no file of `site_dir` is claimed by two distributions, else a message naming the
// first such file and both distributions ("sandrun-evil 1.0 installs sandrun_fixture/
// __init__.py over sandrun-fixture 1.0's", and how many more files), which also says when a
// RECORD could not be read (the directory then cannot be checked, and is not to be served).
// A file both claim with the same SHA-256, which the file on disk has (a namespace package's
// shared __init__.py), and its __pycache__ entries, are no overwrite. Not safe after fork.
std::string FindOverwrites(const std::string& site_dir);

}  // namespace sandrun::storage
