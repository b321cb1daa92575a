fn main() -> std::process::ExitCode {
    use examples::pagerank as p;
    examples::main_with("pagerank", p::FLAGS, p::USAGE, p::run)
}
