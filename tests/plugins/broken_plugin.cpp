// A shared object that is not a Zoo plugin: it loads fine but exports no zoo_plugin_descriptor.
extern "C" __attribute__((visibility("default"))) int zoo_test_broken_marker() { return 42; }
