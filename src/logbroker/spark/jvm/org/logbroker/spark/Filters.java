package org.logbroker.spark;

import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.Literal;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Spark's pushed predicates as the planner's filter tree (spark/narrow.py):
 * AND / OR of comparisons of topic, partition, offset or timestamp with a
 * literal. A predicate with anything else is not translated (it narrows
 * nothing). Spark applies every predicate again after the scan, so a tree
 * needs to keep a superset of the rows only.
 */
final class Filters {
  private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

  private Filters() {}

  /** The tree of a predicate, or null when it is not one the planner narrows by. */
  static JsonNode tree(Predicate p) {
    Expression[] c = p.children();
    switch (p.name()) {
      case "AND":
      case "OR": {
        JsonNode a = tree((Predicate) c[0]);
        JsonNode b = tree((Predicate) c[1]);
        if (p.name().equals("OR") && (a == null || b == null)) return null;
        if (a == null) return b;
        if (b == null) return a;
        ObjectNode out = JSON.objectNode();
        out.putArray(p.name().toLowerCase()).add(a).add(b);
        return out;
      }
      case "=":
      case "<":
      case "<=":
      case ">":
      case ">=":
        return comparison(p.name(), c[0], c[1]);
      case "IN":
        return in(c);
      default:
        return null;
    }
  }

  /** The AND of the trees of {@code predicates} (null: none narrows). */
  static JsonNode and(List<Predicate> predicates) {
    List<JsonNode> trees = new ArrayList<>();
    for (Predicate p : predicates) {
      JsonNode t = tree(p);
      if (t != null) trees.add(t);
    }
    if (trees.isEmpty()) return null;
    ObjectNode out = JSON.objectNode();
    ArrayNode all = out.putArray("and");
    trees.forEach(all::add);
    return out;
  }

  private static JsonNode comparison(String op, Expression left, Expression right) {
    String col = column(left);
    if (col == null) {  // literal op column: flip
      col = column(right);
      Expression t = left;
      left = right;
      right = t;
      op = flip(op);
    }
    if (col == null || !(right instanceof Literal)) return null;
    ObjectNode out = leafNode(col, op);
    return put(out, "value", ((Literal<?>) right).value()) ? out : null;
  }

  private static JsonNode in(Expression[] c) {
    String col = column(c[0]);
    if (col == null) return null;
    ObjectNode out = leafNode(col, "in");
    ArrayNode values = out.putArray("values");
    for (int i = 1; i < c.length; i++) {
      if (!(c[i] instanceof Literal)) return null;
      ObjectNode one = JSON.objectNode();
      if (!put(one, "v", ((Literal<?>) c[i]).value())) return null;
      values.add(one.get("v"));
    }
    return out;
  }

  private static ObjectNode leafNode(String col, String op) {
    ObjectNode out = JSON.objectNode();
    out.put("col", col);
    out.put("op", op);
    return out;
  }

  private static boolean put(ObjectNode node, String field, Object value) {
    if (value instanceof Integer || value instanceof Long || value instanceof Short) {
      node.put(field, ((Number) value).longValue());
      return true;
    }
    if (value instanceof UTF8String || value instanceof String) {
      node.put(field, value.toString());
      return true;
    }
    return false;
  }

  private static String column(Expression e) {
    if (!(e instanceof NamedReference)) return null;
    String[] names = ((NamedReference) e).fieldNames();
    if (names.length != 1) return null;
    switch (names[0]) {
      case "topic":
      case "partition":
      case "offset":
      case "timestamp":
        return names[0];
      default:
        return null;
    }
  }

  private static String flip(String op) {
    switch (op) {
      case "<":
        return ">";
      case "<=":
        return ">=";
      case ">":
        return "<";
      case ">=":
        return "<=";
      default:
        return op;
    }
  }
}
