#define BOOST_TEST_MODULE sandbox_mounts
#include "sandbox/mounts.h"

#include <boost/test/unit_test.hpp>
#include <string>

using sandrun::sandbox::LeanNamespacePth;

namespace {

// setuptools' namespace-package line, as Debian 12's python3-matplotlib ships it
// (/usr/lib/python3/dist-packages/matplotlib-3.6.3-nspkg.pth).
const std::string kMatplotlib =
    "import sys, types, os;has_mfs = sys.version_info > (3, 5);p = "
    "os.path.join(sys._getframe(1).f_locals['sitedir'], *('mpl_toolkits',));importlib = has_mfs "
    "and __import__('importlib.util');has_mfs and __import__('importlib.machinery');m = has_mfs "
    "and sys.modules.setdefault('mpl_toolkits', "
    "importlib.util.module_from_spec(importlib.machinery.PathFinder.find_spec('mpl_toolkits', "
    "[os.path.dirname(p)])));m = m or sys.modules.setdefault('mpl_toolkits', "
    "types.ModuleType('mpl_toolkits'));mp = (m or []) and "
    "m.__dict__.setdefault('__path__',[]);(p not in mp) and mp.append(p)\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(Mounts)

BOOST_AUTO_TEST_CASE(a_namespace_pth_imports_the_frozen_modules_instead) {
  const std::string lean = LeanNamespacePth(kMatplotlib);
  BOOST_TEST(lean ==
             "import sys, types, os;has_mfs = sys.version_info > (3, 5);p = "
             "os.path.join(sys._getframe(1).f_locals['sitedir'], *('mpl_toolkits',));importlib = "
             "has_mfs and __import__('_frozen_importlib');has_mfs and "
             "__import__('_frozen_importlib_external');m = has_mfs and "
             "sys.modules.setdefault('mpl_toolkits', "
             "importlib.module_from_spec(sys.modules['_frozen_importlib_external'].PathFinder."
             "find_spec('mpl_toolkits', [os.path.dirname(p)])));m = m or "
             "sys.modules.setdefault('mpl_toolkits', types.ModuleType('mpl_toolkits'));mp = (m or "
             "[]) and m.__dict__.setdefault('__path__',[]);(p not in mp) and mp.append(p)\n");
  // One line per level of a nested namespace (google, google.cloud): every line is rewritten.
  const std::string two = LeanNamespacePth(kMatplotlib + kMatplotlib);
  BOOST_TEST(two == lean + lean);
}

BOOST_AUTO_TEST_CASE(any_other_pth_is_left_as_it_is) {
  for (const std::string& text :
       {std::string(""), std::string("/opt/lib\n"), std::string("import os\n"),
        // importlib.util used in another way: not the template, so not touched.
        std::string("import importlib.util; importlib.util.find_spec('x')\n"),
        // The template with one of its four names changed.
        kMatplotlib.substr(0, kMatplotlib.find("importlib.machinery.PathFinder")) + "x\n",
        kMatplotlib + "import importlib.util\n"}) {
    BOOST_TEST(LeanNamespacePth(text) == "", text);
  }
}

BOOST_AUTO_TEST_SUITE_END()
