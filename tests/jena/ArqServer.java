// Apache Jena ARQ (Debian's libapache-jena-java) behind the endpoints of a Fuseki dataset, for the
// shared-server tests: /ds/query (GET, form POST, direct POST), /ds/update (form POST or
// application/sparql-update) and /ds/data (the Graph Store Protocol: GET, PUT, POST, DELETE with
// ?graph=IRI or ?default), on one in-memory transactional dataset. The queries, updates and graphs
// are Jena's own work; only the HTTP around them is this file's. Loopback only; stopped by its pid.
//
//     java -cp CLASSES:/usr/share/java/* ArqServer PORT
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import org.apache.jena.graph.Graph;
import org.apache.jena.graph.Node;
import org.apache.jena.graph.NodeFactory;
import org.apache.jena.query.Dataset;
import org.apache.jena.query.DatasetFactory;
import org.apache.jena.query.Query;
import org.apache.jena.query.QueryExecution;
import org.apache.jena.query.QueryExecutionFactory;
import org.apache.jena.query.QueryFactory;
import org.apache.jena.query.ResultSetFormatter;
import org.apache.jena.query.Syntax;
import org.apache.jena.rdf.model.Model;
import org.apache.jena.riot.Lang;
import org.apache.jena.riot.RDFDataMgr;
import org.apache.jena.riot.RDFParser;
import org.apache.jena.sparql.core.DatasetGraph;
import org.apache.jena.sparql.core.DatasetGraphFactory;
import org.apache.jena.sparql.core.DynamicDatasets;
import org.apache.jena.sparql.graph.GraphFactory;
import org.apache.jena.system.Txn;
import org.apache.jena.update.UpdateAction;
import org.apache.jena.update.UpdateFactory;
import org.apache.jena.update.UpdateRequest;

public class ArqServer {
    static final DatasetGraph STORE = DatasetGraphFactory.createTxnMem();

    public static void main(String[] args) throws IOException {
        int port = Integer.parseInt(args[0]);
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 128);
        server.createContext("/ds/query", exchange -> answer(exchange, ArqServer::query));
        server.createContext("/ds/sparql", exchange -> answer(exchange, ArqServer::query));
        server.createContext("/ds/update", exchange -> answer(exchange, ArqServer::update));
        server.createContext("/ds/data", exchange -> answer(exchange, ArqServer::graphStore));
        server.setExecutor(Executors.newFixedThreadPool(8));
        server.start();
    }

    interface Handler {
        void handle(HttpExchange exchange, Map<String, List<String>> parameters, byte[] body) throws Exception;
    }

    static final class Refusal extends Exception {
        final int status;

        Refusal(int status, String message) {
            super(message);
            this.status = status;
        }
    }

    static void answer(HttpExchange exchange, Handler handler) throws IOException {
        try {
            byte[] body = exchange.getRequestBody().readAllBytes();
            Map<String, List<String>> parameters = new LinkedHashMap<>();
            parse(exchange.getRequestURI().getRawQuery(), parameters);
            if (contentType(exchange).equals("application/x-www-form-urlencoded")) {
                parse(new String(body, StandardCharsets.US_ASCII), parameters);
            }
            handler.handle(exchange, parameters, body);
        } catch (Refusal refusal) {
            send(exchange, refusal.status, "text/plain", refusal.getMessage().getBytes(StandardCharsets.UTF_8));
        } catch (Exception error) {
            // Jena's parse errors (QueryParseException, RiotException ...) are the client's fault.
            send(exchange, 400, "text/plain", String.valueOf(error.getMessage()).getBytes(StandardCharsets.UTF_8));
        } finally {
            exchange.close();
        }
    }

    static void parse(String text, Map<String, List<String>> into) {
        if (text == null || text.isEmpty()) {
            return;
        }
        for (String pair : text.split("&")) {
            int equals = pair.indexOf('=');
            String name = URLDecoder.decode(equals < 0 ? pair : pair.substring(0, equals), StandardCharsets.UTF_8);
            String value = equals < 0 ? null : URLDecoder.decode(pair.substring(equals + 1), StandardCharsets.UTF_8);
            into.computeIfAbsent(name, key -> new ArrayList<>()).add(value);
        }
    }

    static String contentType(HttpExchange exchange) {
        String type = exchange.getRequestHeaders().getFirst("Content-Type");
        return type == null ? "" : type.split(";")[0].trim().toLowerCase();
    }

    static String one(Map<String, List<String>> parameters, String name) {
        List<String> values = parameters.get(name);
        return values == null || values.isEmpty() ? null : values.get(0);
    }

    static void send(HttpExchange exchange, int status, String type, byte[] body) throws IOException {
        if (type != null) {
            // As Fuseki writes it: every answer it sends is UTF-8 and says so.
            exchange.getResponseHeaders().set("Content-Type", type + "; charset=utf-8");
        }
        boolean empty = body.length == 0 || exchange.getRequestMethod().equals("HEAD");
        exchange.sendResponseHeaders(status, empty ? -1 : body.length);
        if (!empty) {
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        }
    }

    static void query(HttpExchange exchange, Map<String, List<String>> parameters, byte[] body) throws Exception {
        String method = exchange.getRequestMethod();
        String text = one(parameters, "query");
        if (method.equals("POST") && contentType(exchange).equals("application/sparql-query")) {
            text = new String(body, StandardCharsets.UTF_8);
        }
        if (!(method.equals("GET") || method.equals("POST") || method.equals("HEAD"))) {
            throw new Refusal(405, "method not allowed: " + method);
        }
        if (text == null) {
            throw new Refusal(400, "no query given");
        }
        Query query = QueryFactory.create(text, Syntax.syntaxSPARQL_11);
        List<String> defaults = parameters.getOrDefault("default-graph-uri", List.of());
        List<String> named = parameters.getOrDefault("named-graph-uri", List.of());
        String accept = String.valueOf(exchange.getRequestHeaders().getFirst("Accept"));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        String[] type = new String[1];
        Txn.executeRead(STORE, () -> {
            DatasetGraph over = STORE;
            if (!defaults.isEmpty() || !named.isEmpty()) {
                over = DynamicDatasets.dynamicDataset(nodes(defaults), nodes(named), STORE, false);
            }
            Dataset dataset = DatasetFactory.wrap(over);
            try (QueryExecution execution = QueryExecutionFactory.create(query, dataset)) {
                if (query.isSelectType()) {
                    type[0] = resultType(accept);
                    if (type[0].equals("text/csv")) {
                        ResultSetFormatter.outputAsCSV(out, execution.execSelect());
                    } else if (type[0].equals("text/tab-separated-values")) {
                        ResultSetFormatter.outputAsTSV(out, execution.execSelect());
                    } else if (type[0].equals("application/sparql-results+xml")) {
                        ResultSetFormatter.outputAsXML(out, execution.execSelect());
                    } else {
                        ResultSetFormatter.outputAsJSON(out, execution.execSelect());
                    }
                } else if (query.isAskType()) {
                    type[0] = resultType(accept);
                    boolean yes = execution.execAsk();
                    if (type[0].equals("text/csv")) {
                        ResultSetFormatter.outputAsCSV(out, yes);
                    } else if (type[0].equals("text/tab-separated-values")) {
                        ResultSetFormatter.outputAsTSV(out, yes);
                    } else if (type[0].equals("application/sparql-results+xml")) {
                        ResultSetFormatter.outputAsXML(out, yes);
                    } else {
                        ResultSetFormatter.outputAsJSON(out, yes);
                    }
                } else {
                    Model model = query.isConstructType() ? execution.execConstruct() : execution.execDescribe();
                    boolean turtle = accept.contains("text/turtle") && !accept.contains("application/n-triples");
                    type[0] = turtle ? "text/turtle" : "application/n-triples";
                    RDFDataMgr.write(out, model, turtle ? Lang.TURTLE : Lang.NTRIPLES);
                }
            }
        });
        send(exchange, 200, type[0], out.toByteArray());
    }

    static List<Node> nodes(List<String> iris) {
        List<Node> nodes = new ArrayList<>();
        for (String iri : iris) {
            nodes.add(NodeFactory.createURI(iri));
        }
        return nodes;
    }

    static String resultType(String accept) {
        for (String type : new String[] {
            "application/sparql-results+json", "text/csv", "text/tab-separated-values", "application/sparql-results+xml"
        }) {
            if (accept.contains(type)) {
                return type;
            }
        }
        return "application/sparql-results+json";
    }

    static void update(HttpExchange exchange, Map<String, List<String>> parameters, byte[] body) throws Exception {
        if (!exchange.getRequestMethod().equals("POST")) {
            throw new Refusal(405, "an update is a POST");
        }
        String text = contentType(exchange).equals("application/sparql-update")
            ? new String(body, StandardCharsets.UTF_8)
            : one(parameters, "update");
        if (text == null) {
            throw new Refusal(400, "no update given");
        }
        UpdateRequest request = UpdateFactory.create(text, Syntax.syntaxSPARQL_11);
        Txn.executeWrite(STORE, () -> UpdateAction.execute(request, STORE));
        send(exchange, 204, null, new byte[0]);
    }

    static void graphStore(HttpExchange exchange, Map<String, List<String>> parameters, byte[] body) throws Exception {
        String iri = one(parameters, "graph");
        if (iri == null && !parameters.containsKey("default")) {
            throw new Refusal(400, "name a graph: ?graph=IRI or ?default");
        }
        Node name = iri == null ? null : NodeFactory.createURI(iri);
        String method = exchange.getRequestMethod();
        if (method.equals("GET") || method.equals("HEAD")) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            boolean[] found = {true};
            Txn.executeRead(STORE, () -> {
                if (name != null && !STORE.containsGraph(name)) {
                    found[0] = false;
                    return;
                }
                RDFDataMgr.write(out, name == null ? STORE.getDefaultGraph() : STORE.getGraph(name), Lang.NTRIPLES);
            });
            if (!found[0]) {
                throw new Refusal(404, "no such graph: " + iri);
            }
            send(exchange, 200, "application/n-triples", out.toByteArray());
            return;
        }
        if (method.equals("DELETE")) {
            boolean[] found = {true};
            Txn.executeWrite(STORE, () -> {
                if (name == null) {
                    STORE.getDefaultGraph().clear();
                } else if (STORE.containsGraph(name)) {
                    STORE.removeGraph(name);
                } else {
                    found[0] = false;
                }
            });
            if (!found[0]) {
                throw new Refusal(404, "no such graph: " + iri);
            }
            send(exchange, 204, null, new byte[0]);
            return;
        }
        if (!method.equals("PUT") && !method.equals("POST")) {
            throw new Refusal(405, "method not allowed: " + method);
        }
        String type = contentType(exchange);
        Lang lang = type.equals("text/turtle") ? Lang.TURTLE : type.equals("application/n-triples") ? Lang.NTRIPLES : null;
        if (lang == null) {
            throw new Refusal(415, "send N-Triples or Turtle, not " + type);
        }
        Graph parsed = GraphFactory.createDefaultGraph();
        try (InputStream in = new java.io.ByteArrayInputStream(body)) {
            RDFParser.source(in).lang(lang).parse(parsed);
        }
        boolean[] created = {false};
        Txn.executeWrite(STORE, () -> {
            created[0] = name != null && !STORE.containsGraph(name);
            Graph target = name == null ? STORE.getDefaultGraph() : STORE.getGraph(name);
            if (method.equals("PUT")) {
                target.clear();
            }
            parsed.find().forEachRemaining(target::add);
        });
        send(exchange, created[0] ? 201 : 204, null, new byte[0]);
    }
}
